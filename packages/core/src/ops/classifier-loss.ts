import { type DeviceKind, bytesPerElement } from "@kiln/contract";
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
 * a step, 4 chunks 1.2 GB. A GPU has the memory for the larger chunks.
 */
export const GPU_LOGITS_CHUNK_BYTES = 256 * 2 ** 20;
/** ...unless that leaves fewer rows than this, which keeps the chunks' matmuls large enough to run at speed. */
export const LOGITS_CHUNK_MIN_ROWS = 256;

/** The logits bytes a chunk of the training loss may hold on a device of this kind. */
export function logitsChunkBytes(kind: DeviceKind = "cpu"): number {
  return kind === "gpu" ? GPU_LOGITS_CHUNK_BYTES : LOGITS_CHUNK_BYTES;
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
  /** The head weight's gradient tensor, already holding this loss's contribution. */
  headGrad: number;
}

/**
 * The training loss from the final hidden states without the whole logits matrix: rows go
 * through the output weight (vocab, hidden) a chunk at a time, and each chunk's logits are
 * turned into their loss and gradient at once (cross-entropy forward and backward, the
 * gradient over the logits in place), which then yield the chunk's rows of d(hidden) and
 * add into the head weight's gradient. Only one chunk's logits are ever live, so the
 * training arena holds rows/chunk times fewer logits; the arithmetic is the same kernels'.
 * d(row loss) is the run-time lossScale, as for crossEntropyLoss's backward.
 */
export function chunkedClassifierLoss(g: Graph, hidden: number, head: number, targets: number, name: string, chunkRows?: number, chunkBytes?: number): ClassifierLoss {
  const [rows, width] = g.info(hidden).shape;
  const [vocab] = g.info(head).shape;
  const dtype = g.info(hidden).dtype;
  const chunk = chunkRows ?? logitsChunkRows(rows, vocab, bytesPerElement(dtype), chunkBytes);
  const losses = g.tensor([rows], "f32", "activation", `${name}.rows`);
  const dHidden = g.tensor([rows, width], dtype, "activation", `d(${g.info(hidden).name})`);
  const headGrad = paramGradTensor(g, head);
  for (let r0 = 0, i = 0; r0 < rows; r0 += chunk, i++) {
    const n = Math.min(chunk, rows - r0);
    const x = { id: hidden, offset: r0 * width };
    const logits = g.tensor([n, vocab], dtype, "activation", `${name}.logits.${i}`);
    const lse = g.tensor([n], "f32", "activation", `${name}.lse.${i}`);
    addKernelNode(g, "matmul", { a: x, b: head, c: logits }, { m: n, n: vocab, k: width, transB: true, dtype });
    const t = { id: targets, offset: r0 };
    addKernelNode(g, "crossEntropyForward", { logits, targets: t, losses: { id: losses, offset: r0 }, lse }, { rows: n, vocab, dtype });
    const dLogits = g.tensor([n, vocab], dtype, "activation", `d(${name}.logits.${i})`);
    addKernelNode(g, "crossEntropyBackward", { logits, targets: t, lse, dLogits }, { rows: n, vocab, lossScale: 1, dtype }, { runtimeArgs: { lossScale: "lossScale" } });
    // d(hidden) rows = dLogits · W;  dW += dLogits^T · hidden rows
    addKernelNode(g, "matmul", { a: dLogits, b: head, c: { id: dHidden, offset: r0 * width } }, { m: n, n: width, k: vocab, dtype });
    addKernelNode(g, "matmul", { a: dLogits, b: x, c: headGrad }, { m: vocab, n: width, k: n, transA: true, accumulate: true, dtype, ...gradDtypeArg(g, headGrad, dtype, "cDtype") });
  }
  const lossSum = g.tensor([1], "f32", "output", name);
  addKernelNode(g, "sum", { x: losses, out: lossSum }, { n: rows, dtype: "f32" });
  return { lossSum, dHidden, headGrad };
}
