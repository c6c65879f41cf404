import { type DeviceKind, type FloatDType, KilnError, bytesPerElement } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { gradDtypeArg, paramGradTensor } from "./grad-rule.js";

/**
 * Logits one chunk of the training loss materialises on a CPU: at most this many bytes,
 * so a chunk's logits and their gradient stay near the caches...
 */
export const LOGITS_CHUNK_BYTES = 16 * 2 ** 20;
/**
 * ...and on a GPU. Every chunk adds its share into the head weight's f32 gradient,
 * which the matmul reads and writes whole (GPT-2's: 154 MB each time), so small chunks
 * turn that product into memory traffic: 32 chunks of gpt2-small's 8192 rows move 9.9 GB
 * a step, 4 chunks 1.2 GB, one chunk (824 MB of padded bf16 logits) 0.3 GB. Fewer chunks
 * also make the head's products larger: d(hidden) of a chunk is (rows x hidden), 48
 * output tiles of 128 x 256 for 2048 rows of GPT-2, too few to fill a GPU without
 * splitting the long (vocabulary) sum. A GPU has the memory for the larger chunks
 * (gpt2-small bf16: 0.6 GiB more activations than with 256 MiB chunks).
 */
export const GPU_LOGITS_CHUNK_BYTES = 1024 * 2 ** 20;
/** ...unless that leaves fewer rows than this, which keeps the chunks' matmuls large enough to run at speed. */
export const LOGITS_CHUNK_MIN_ROWS = 256;

/** The logits bytes a chunk of the training loss may hold on a device of this kind (or `chosen`, when given). */
export function logitsChunkBytes(kind: DeviceKind = "cpu", chosen?: number): number {
  if (chosen !== undefined) {
    if (!Number.isSafeInteger(chosen) || chosen < 1) {
      throw new KilnError(`lossChunkBytes ${chosen} is not a positive whole number of bytes`, { where: "lossChunkBytes", hint: "give the logits bytes a chunk of the training loss may hold, e.g. 268435456 (256 MiB), or leave it out for the device's default" });
    }
    return chosen;
  }
  return kind === "gpu" ? GPU_LOGITS_CHUNK_BYTES : LOGITS_CHUNK_BYTES;
}

/**
 * On a GPU the loss's logits have their rows padded to a multiple of this (GPT-2's 50257
 * to 50304): a logits row of 50257 16-bit elements is not 16-byte aligned, which rules out
 * the fast tensor-core GEMMs (cuBLASLt's and kiln's) for all three of the head's products,
 * a third of a gpt2-small step's FLOPs. The padded columns come out of the forward product
 * at the dtype's lowest value (zero weight rows, that bias), so the softmax gives them 0
 * and their gradient is 0: the loss and gradients are the unpadded ones; the backward
 * products read only the real columns (lda). A CPU pads nothing.
 */
export const GPU_VOCAB_MULTIPLE = 128;

/** The vocabulary multiple the training loss pads to on a device of this kind (1: none). */
export function lossVocabMultiple(kind: DeviceKind = "cpu"): number {
  return kind === "gpu" ? GPU_VOCAB_MULTIPLE : 1;
}

/** The lowest finite value of a float dtype: the padded logits, whose exp underflows to 0 beside any real logit. */
function lowestFinite(dtype: FloatDType): number {
  return dtype === "f16" ? -65504 : dtype === "bf16" ? -3.3895313892515355e38 : -3.4028234663852886e38;
}

/**
 * Rows per chunk of the training loss (all of them when they are few): as many chunks as
 * the byte limit needs, the rows shared out evenly between them (the last one at most
 * chunks - 1 rows shorter).
 */
export function logitsChunkRows(rows: number, vocab: number, bytesPerLogit: number, chunkBytes = LOGITS_CHUNK_BYTES): number {
  const most = Math.min(rows, Math.max(LOGITS_CHUNK_MIN_ROWS, Math.floor(chunkBytes / (vocab * bytesPerLogit))));
  return Math.ceil(rows / Math.ceil(rows / most));
}

export interface ClassifierLoss {
  /** f32 [1] output: the sum of the row losses. */
  lossSum: number;
  /** d(loss)/d(hidden), (rows, hidden): where the rest of the backward pass starts. */
  dHidden: number;
  /** The head weight's gradient tensor, already holding this loss's contribution; absent when the head is frozen. */
  headGrad?: number;
}

/**
 * The training loss from the final hidden states without the whole logits matrix: rows go
 * through the output weight (vocab, hidden) a chunk at a time, and each chunk's logits are
 * turned into their loss and gradient at once (crossEntropyForward writing dLogits too,
 * over the logits in place: one read of them), which then yield the chunk's rows of d(hidden) and
 * add into the head weight's gradient. Only one chunk's logits are ever live, so the
 * training arena holds rows/chunk times fewer logits; the arithmetic is the same kernels'.
 * d(row loss) is the run-time lossScale, as for crossEntropyLoss's backward.
 * vocabMultiple > 1 pads the forward product's vocabulary to a multiple of it
 * (GPU_VOCAB_MULTIPLE): a copy of the head weight with zero rows after it and a bias of
 * the dtype's lowest value on the padded columns. The backward products read the logits'
 * gradient's real columns in place (matmul's lda: rows of the padded width): d(hidden)
 * from the head weight itself, and the head's gradient added straight into the parameter's.
 */
export function chunkedClassifierLoss(
  g: Graph,
  hidden: number,
  head: number,
  targets: number,
  name: string,
  chunkRows?: number,
  chunkBytes?: number,
  vocabMultiple = 1,
): ClassifierLoss {
  const [rows, width] = g.info(hidden).shape;
  const [vocab] = g.info(head).shape;
  const dtype = g.info(hidden).dtype as FloatDType;
  const padded = Math.ceil(vocab / vocabMultiple) * vocabMultiple;
  const chunk = chunkRows ?? logitsChunkRows(rows, padded, bytesPerElement(dtype), chunkBytes);
  const losses = g.tensor([rows], "f32", "activation", `${name}.rows`);
  const dHidden = g.tensor([rows, width], dtype, "activation", `d(${g.info(hidden).name})`);
  const headGrad = g.info(head).frozen ? undefined : paramGradTensor(g, head);
  const pad = padded === vocab ? undefined : paddedHead(g, head, padded, name);
  const weight = pad?.weight ?? head;
  // The backward products read the logits' gradient's rows padded wide (lda), their real columns alone.
  const dLogitsRows = pad ? { lda: padded } : {};
  for (let r0 = 0, i = 0; r0 < rows; r0 += chunk, i++) {
    const n = Math.min(chunk, rows - r0);
    const x = { id: hidden, offset: r0 * width };
    const logits = g.tensor([n, padded], dtype, "activation", `${name}.logits.${i}`);
    const lse = g.tensor([n], "f32", "activation", `${name}.lse.${i}`);
    addKernelNode(g, "matmul", { a: x, b: weight, c: logits, ...(pad ? { bias: pad.bias } : {}) }, { m: n, n: padded, k: width, transB: true, dtype });
    // The chunk's losses and their gradient over the logits in one pass over the logits (in place).
    const t = { id: targets, offset: r0 };
    const dLogits = g.tensor([n, padded], dtype, "activation", `d(${name}.logits.${i})`);
    addKernelNode(g, "crossEntropyForward", { logits, targets: t, losses: { id: losses, offset: r0 }, lse, dLogits }, { rows: n, vocab: padded, lossScale: 1, dtype }, { runtimeArgs: { lossScale: "lossScale" } });
    // d(hidden) rows = dLogits · W;  dW += dLogits^T · hidden rows (the real vocabulary's columns of dLogits)
    addKernelNode(g, "matmul", { a: dLogits, b: head, c: { id: dHidden, offset: r0 * width } }, { m: n, n: width, k: vocab, ...dLogitsRows, dtype });
    if (headGrad !== undefined) addKernelNode(g, "matmul", { a: dLogits, b: x, c: headGrad }, { m: vocab, n: width, k: n, transA: true, ...dLogitsRows, accumulate: true, dtype, ...gradDtypeArg(g, headGrad, dtype, "cDtype") });
  }
  const lossSum = g.tensor([1], "f32", "output", name);
  addKernelNode(g, "sum", { x: losses, out: lossSum }, { n: rows, dtype: "f32" });
  return { lossSum, dHidden, headGrad };
}

/**
 * The padded operands of chunkedClassifierLoss's forward product: the head weight's rows
 * then zero rows up to `padded`, and a bias of 0 on the real columns and the dtype's lowest
 * value on the padded ones.
 */
function paddedHead(g: Graph, head: number, padded: number, name: string) {
  const [vocab, width] = g.info(head).shape;
  const dtype = g.info(head).dtype as FloatDType;
  const weight = g.tensor([padded, width], dtype, "activation", `${name}.head_padded`);
  addKernelNode(g, "copyStrided", { src: head, dst: weight }, { batch: 1, rows: vocab, cols: width, srcBatchStride: 0, srcRowStride: width, dstBatchStride: 0, dstRowStride: width, dtype });
  addKernelNode(g, "fill", { out: { id: weight, offset: vocab * width } }, { n: (padded - vocab) * width, value: 0, dtype });
  const bias = g.tensor([padded], dtype, "activation", `${name}.pad_bias`);
  addKernelNode(g, "fill", { out: bias }, { n: vocab, value: 0, dtype });
  addKernelNode(g, "fill", { out: { id: bias, offset: vocab } }, { n: padded - vocab, value: lowestFinite(dtype), dtype });
  return { weight, bias };
}
