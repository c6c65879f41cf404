import type { DeviceKind } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { appendBackward } from "../autodiff/append-backward.js";
import { type RecomputePolicy, rematerialize } from "../autodiff/rematerialize.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { fuseResidualNorms } from "../graph/fuse-residual-norms.js";
import { fuseBiasGradients } from "../graph/fuse-bias-gradients.js";
import { chunkedClassifierLoss, logitsChunkBytes, lossVocabMultiple } from "../ops/classifier-loss.js";
import { crossEntropyLoss, linear } from "../ops/index.js";
import { ConfigError } from "@kiln/contract";
import { type ModelConfig, mambaOf } from "./config.js";
import { archOf } from "./architectures.js";
import type { ParamLayout } from "./param-layout.js";
import { checkAdaptersApplied, startTrace } from "./trace.js";

export interface ModelGraph {
  graph: Graph;
  batch: number;
  seqLen: number;
  /** i32 token ids (batch*seqLen), uploaded per step. */
  ids: number;
  /**
   * i32 positions 0..seqLen-1 per sequence (architectures with learned positions), uploaded once;
   * in packed rows counted from each document's start (positionsInRows), uploaded with each batch.
   */
  positions?: number;
  /** Packed rows: the i32 (batch*seqLen) document starts, uploaded with each batch (Batch.docStarts). */
  docStarts?: number;
  /** The logits (rows, vocab); training graphs make them a chunk at a time inside the loss and have none whole. */
  logits?: number;
  /**
   * Present on training graphs. auxLoss (f32 [1], mixture-of-experts models only) is the
   * sum of the layers' load-balancing losses, an output beside lossSum; expertOffsets the
   * i32 (E + 1) slot offsets of each such layer, whose differences count each expert's tokens.
   */
  training?: { targets: number; lossSum: number; paramGrads: Map<number, number>; auxLoss?: number; expertOffsets?: number[] };
}

/**
 * The forward pass up to the final hidden states and the output weight. `packed`: rows of
 * several documents, whose starts are an input the attention and rotary kernels take.
 */
function forward(config: ModelConfig, layout: ParamLayout, batch: number, seqLen: number, packed: boolean, training = false) {
  const t = startTrace(config, layout, batch, seqLen, training);
  const ids = t.g.tensor([batch * seqLen], "i32", "input", "input_ids");
  const arch = archOf(config);
  if (packed) {
    checkPackable(config);
    t.g.documentStarts = t.g.tensor([batch * seqLen], "i32", "input", "doc_starts");
  }
  const positions = arch.positionIds ? t.g.tensor([batch * seqLen], "i32", packed ? "input" : "constant", "position_ids") : undefined;
  const { hidden, head } = arch.forward(t, ids, positions);
  checkAdaptersApplied(t);
  return { t, ids, positions, hidden, head };
}

/** What a graph returns beside its own outputs: ids, positions and document starts. */
function inputsOf(t: { g: Graph }, ids: number, positions: number | undefined) {
  const docStarts = t.g.documentStarts;
  return { ids, ...(positions === undefined ? {} : { positions }), ...(docStarts === undefined ? {} : { docStarts }) };
}

/** The forward pass to the whole logits matrix, residual sums folded into the norms that read them. */
function forwardToLogits(config: ModelConfig, layout: ParamLayout, batch: number, seqLen: number, packed: boolean) {
  const { t, ids, positions, hidden, head } = forward(config, layout, batch, seqLen, packed);
  const logits = linear(t.g, hidden, head, undefined, "out_in", "logits");
  fuseResidualNorms(t.g);
  return { t, ids, positions, logits };
}

/** The forward pass alone (evaluation, generation). */
export function buildForwardGraph(config: ModelConfig, layout: ParamLayout, batch: number, seqLen: number, packed = false): ModelGraph & { logits: number } {
  const { t, ids, positions, logits } = forwardToLogits(config, layout, batch, seqLen, packed);
  return { graph: t.g, batch, seqLen, ...inputsOf(t, ids, positions), logits };
}

/** Forward and the summed cross-entropy loss, no backward (evaluation). */
export function buildEvalGraph(config: ModelConfig, layout: ParamLayout, batch: number, seqLen: number, packed = false): ModelGraph & { logits: number; eval: { targets: number; lossSum: number } } {
  const { t, ids, positions, logits } = forwardToLogits(config, layout, batch, seqLen, packed);
  const targets = t.g.tensor([batch * seqLen], "i32", "input", "labels");
  const { lossSum } = crossEntropyLoss(t.g, logits, targets, "loss");
  return { graph: t.g, batch, seqLen, ...inputsOf(t, ids, positions), logits, eval: { targets, lossSum } };
}

/**
 * Forward, the cross-entropy loss and the whole backward pass, as one graph. The loss and
 * its gradient come a chunk of rows at a time (chunkedClassifierLoss), so the logits are
 * never whole (chunks sized for the kind of device that runs the step, the vocabulary
 * padded for aligned products on a GPU); the backward pass starts from the final hidden
 * states' gradient. Residual sums are folded into the norms that read them (fuseResidualNorms),
 * and bias gradients into the norm backwards that wrote their rows (fuseBiasGradients).
 * lossChunkBytes overrides the device kind's logits bytes a loss chunk may hold.
 */
export function buildTrainingGraph(
  config: ModelConfig,
  layout: ParamLayout,
  batch: number,
  seqLen: number,
  recompute: RecomputePolicy = "cheap",
  device: DeviceKind = "cpu",
  lossChunkBytes?: number,
  packed = false,
): ModelGraph {
  const { t, ids, positions, hidden, head } = forward(config, layout, batch, seqLen, packed, true);
  const targets = t.g.tensor([batch * seqLen], "i32", "input", "labels");
  const before = t.g.nodes.length;
  const { lossSum, dHidden, headGrad } = t.g.withScope("loss", () => chunkedClassifierLoss(t.g, hidden, head, targets, "loss", undefined, logitsChunkBytes(device, lossChunkBytes), lossVocabMultiple(device)));
  const auxLoss = t.auxLosses.length > 0 ? sumOfScalars(t.g, t.auxLosses, "aux_loss") : undefined;
  const { paramGrads } = appendBackward(t.g, { before, grads: new Map([[hidden, dHidden]]), paramGrads: new Map(headGrad === undefined ? [] : [[head, headGrad]]) });
  rematerialize(t.g, recompute, archOf(config).blockPrefix);
  fuseResidualNorms(t.g);
  fuseBiasGradients(t.g);
  const training = { targets, lossSum, paramGrads, ...(auxLoss === undefined ? {} : { auxLoss, expertOffsets: t.expertOffsets }) };
  return { graph: t.g, batch, seqLen, ...inputsOf(t, ids, positions), training };
}

/** An f32 [1] output holding the sum of f32 [1] tensors (not differentiated: each part's gradient enters where it is made). */
function sumOfScalars(g: Graph, parts: readonly number[], name: string): number {
  const out = g.tensor([1], "f32", "output", name);
  if (parts.length === 1) {
    addKernelNode(g, "scale", { x: parts[0], out }, { n: 1, alpha: 1, dtype: "f32" });
    return out;
  }
  let total = parts[0];
  for (let i = 1; i < parts.length; i++) {
    const next = i === parts.length - 1 ? out : g.tensor([1], "f32", "activation", `${name}.${i}`);
    addKernelNode(g, "add", { a: total, b: parts[i], out: next }, { n: 1, dtype: "f32" });
    total = next;
  }
  return out;
}

/**
 * Packed rows need every layer to keep documents apart: attention and rotary embeddings take
 * their starts, but a Mamba layer's state (and its convolution) would carry one document into the next.
 */
function checkPackable(config: ModelConfig): void {
  if (mambaOf(config)) {
    throw new ConfigError("packing examples into rows needs a model of attention layers alone: a Mamba layer's state carries one example into the next", {
      where: "trainer.pack",
      hint: "leave trainer.pack (--pack) off for this model: each example then takes a row of its own, padded",
    });
  }
}

/** Positions in packed rows: each token's offset from its document's start. */
export function positionsInRows(docStarts: Int32Array, seqLen: number, out = new Int32Array(docStarts.length)): Int32Array {
  for (let i = 0; i < out.length; i++) out[i] = (i % seqLen) - docStarts[i];
  return out;
}

/** Position ids for a (batch, seqLen) step: 0..seqLen-1 repeated per sequence. */
export function positionIds(batch: number, seqLen: number): Int32Array {
  const out = new Int32Array(batch * seqLen);
  for (let i = 0; i < out.length; i++) out[i] = i % seqLen;
  return out;
}
