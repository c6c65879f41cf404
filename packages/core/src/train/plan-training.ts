import type { DeviceKind, FloatDType } from "@kiln/contract";
import { type ModelConfig, attentionWindow, headDim, mamba3Of, mambaOf } from "../model/config.js";
import { mamba2ScanFlopsPerToken } from "../model/mamba2.js";
import { mamba3ExtraFlopsPerToken } from "../model/mamba3.js";
import { buildEvalGraph, buildTrainingGraph } from "../model/build-graph.js";
import { paramLayout, trainableLayout } from "../model/param-layout.js";
import { archOf } from "../model/architectures.js";
import { planStep } from "../plan/plan-step.js";
import type { RecomputePolicy } from "../autodiff/rematerialize.js";
import { type MemoryPlan, totalOf } from "./memory-plan.js";
import { SHARDED_PARAM_ALIGN, shardedMemory } from "./optimizer-shard.js";

/** Bytes of the small scalar buffer a trainer keeps (gradient norm). */
export const TRAINER_SCALAR_BYTES = 64;

/**
 * The exact device bytes a Trainer will allocate for (model, batch, seqLen), from
 * the planned training graph, without allocating anything. Gradients are f32 in every
 * dtype; with a 16-bit dtype the parameters and activations are 16-bit, and f32
 * master weights are added. `device` is the kind of device the step runs on (the
 * training loss's logits come in larger chunks on a GPU); lossChunkBytes, when given,
 * is the logits bytes a chunk of the loss may hold instead of the device kind's.
 */
export function planTrainingMemory(...args: Parameters<typeof planTraining>): MemoryPlan {
  return planTraining(...args).memory;
}

/**
 * The training graph of (model, batch, seqLen) on a kind of device, its step plan and its memory plan
 * (of one rank whose optimizer state is sharded over `shardRanks` ranks, when more than 1: shardedMemory).
 */
export function planTraining(
  model: ModelConfig,
  batchSize: number,
  seqLen: number,
  dtype: FloatDType = "f32",
  recompute: RecomputePolicy = "cheap",
  device: DeviceKind = "cpu",
  lossChunkBytes?: number,
  shardRanks = 1,
  /** Rows packed with several documents (their starts an input of attention and rotary embeddings). */
  packed = false,
) {
  // Sharded under a 16-bit dtype, each parameter at half its state offset: the all-gather fills them in place.
  const layout = shardRanks > 1 && dtype !== "f32" ? paramLayout(model, dtype, SHARDED_PARAM_ALIGN) : paramLayout(model, dtype);
  // Gradients, AdamW state and master weights cover the trained parameters alone.
  const state = trainableLayout(paramLayout(model, "f32"));
  const graph = buildTrainingGraph(model, layout, batchSize, seqLen, recompute, device, lossChunkBytes, packed);
  const step = planStep(graph.graph);
  const mixed = dtype !== "f32";
  const whole = totalOf({
    parameters: layout.bytes + (mixed ? state.bytes : 0),
    gradients: state.bytes,
    optimizerState: 2 * state.bytes,
    activations: step.arena.bytes,
    activationsUnpacked: step.arena.unpackedBytes,
    io: step.inputBytes + step.constantBytes + step.outputBytes + TRAINER_SCALAR_BYTES,
  });
  const memory = shardRanks > 1 ? shardedMemory(whole, layout, state, shardRanks) : whole;
  return { layout, stateLayout: state, graph, step, memory };
}

/**
 * Training FLOPs per token: 6 per active parameter (4 per frozen one; all but ArchDef.inactiveParams:
 * GPT-2's position embedding, the experts a token is not routed to) plus attention's score and value products,
 * 12 * layers * heads * head size * seqLen (forward 4, backward 8; as in PaLM's MFU accounting), over the
 * attention layers, with a sliding window's keys in place of seqLen where it is shorter; Mamba2 layers add their scan's forward FLOPs (the contract's count for the chunked form) times 3,
 * Mamba3 layers their scan's and the MIMO projections' reuse over heads (mamba3ExtraFlopsPerToken) times 3.
 */
export function trainingFlopsPerToken(model: ModelConfig, seqLen: number): number {
  const layout = paramLayout(model, "f32");
  const mamba = mambaOf(model);
  // 12 FLOPs per query-key pair per head channel (q·k and p·v, forward and backward), over
  // every key before a query (the usual count, causal mask or not), or its window.
  let attention = 0;
  for (let i = 0; i < model.numLayers; i++) {
    if (!mamba?.layers.has(i)) attention += 12 * model.numHeads * headDim(model) * Math.min(attentionWindow(model, i) ?? seqLen, seqLen);
  }
  // A frozen weight (LoRA's base, the inactive ones among them) has no weight gradient: 4 FLOPs a parameter, not 6.
  const inactive = archOf(model).inactiveParams(model);
  const frozen = layout.count - trainableLayout(layout).count;
  const frozenActive = frozen > 0 ? frozen - inactive : 0;
  return 6 * (layout.count - inactive) - 2 * frozenActive + attention + 3 * (mamba3Of(model) ? mamba3ExtraFlopsPerToken(model, seqLen) : mamba2ScanFlopsPerToken(model, seqLen));
}

/**
 * Device bytes a ForwardRunner (evaluation or generation) for (batch, seqLen) allocates:
 * its I/O, and its arena unless it shares one of `sharedArenaBytes` that holds it
 * (a trainer's runner shares the training arena: pass the plan's `activations`).
 */
export function planForwardMemory(model: ModelConfig, batchSize: number, seqLen: number, dtype: FloatDType = "f32", sharedArenaBytes = 0, packed = false): number {
  const g = buildEvalGraph(model, paramLayout(model, dtype), batchSize, seqLen, packed);
  const p = planStep(g.graph);
  const shares = sharedArenaBytes > 0 && p.arena.bytes <= sharedArenaBytes;
  return (shares ? 0 : p.arena.bytes) + p.inputBytes + p.constantBytes + p.outputBytes;
}
