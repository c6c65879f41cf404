import { formatBytes } from "./format-bytes.js";

const MiB = 2 ** 20;

/**
 * Host memory of a `kiln train` process besides its memory plan, with one kernel thread:
 * Node and kiln's modules, the compiled kernels and JavaScript, the data reader's and
 * the checkpoint writer's buffers (4 MiB each). Measured as the peak RSS (/usr/bin/time)
 * of whole runs (evaluation, a checkpoint, final weights) of a model whose plan is under
 * 1 MiB: 121-129 MiB over runs, Node 20 on Linux x64.
 */
export const NODE_RUNTIME_BYTES = 129 * MiB;

/**
 * Each kernel thread beyond the first: a worker with its own JavaScript heap, its stack
 * and matmul scratch in the WebAssembly memory. Measured as above with 1 to 4 threads
 * (+14, +9, +8 MiB).
 */
export const BYTES_PER_EXTRA_THREAD = 9 * MiB;

export interface ProcessPeak {
  /** The whole process's expected peak RSS. */
  bytes: number;
  /** The memory plan's share of it: all of it where the device's memory is the host's (the CPU), else 0. */
  plan: number;
  runtime: number;
  /** Kernel worker threads beyond the first. */
  extraThreads: number;
  /** Token batches: the prefetched ones, the one in use and evaluation's. */
  batches: number;
  /** Whether the plan lives in host memory (the CPU backend's device memory is the process's). */
  planOnHost: boolean;
}

/**
 * The peak RSS a training process is expected to reach: its memory plan (evaluation
 * included) when the device's memory is host memory, the Node runtime, the kernel
 * threads and the data batches.
 */
export function processPeak(o: { planned: number; planOnHost: boolean; threads: number; batchSize: number; seqLen: number; prefetch: number }): ProcessPeak {
  const plan = o.planOnHost ? o.planned : 0;
  const extraThreads = o.planOnHost ? Math.max(0, o.threads - 1) * BYTES_PER_EXTRA_THREAD : 0;
  // ids and targets (i32) per batch: depth + 1 prefetch buffers and the evaluation batch.
  const batches = (Math.max(1, o.prefetch) + 2) * 8 * o.batchSize * o.seqLen;
  return { bytes: plan + NODE_RUNTIME_BYTES + extraThreads + batches, plan, runtime: NODE_RUNTIME_BYTES, extraThreads, batches, planOnHost: o.planOnHost };
}

/** "~603 MiB RSS expected for the process: the plan 465 MiB (host memory), the Node runtime 129 MiB, 1 more kernel thread 9.00 MiB, batches 64.0 KiB". */
export function formatProcessPeak(p: ProcessPeak, threads: number): string {
  const parts = [
    p.planOnHost ? `the plan ${formatBytes(p.plan)} (host memory)` : "the plan on the device",
    `the Node runtime ${formatBytes(p.runtime)}`,
    ...(p.extraThreads > 0 ? [`${threads - 1} more kernel thread${threads > 2 ? "s" : ""} ${formatBytes(p.extraThreads)}`] : []),
    `batches ${formatBytes(p.batches)}`,
  ];
  return `~${formatBytes(p.bytes)} RSS expected for the process: ${parts.join(", ")}${p.planOnHost ? "" : "; the GPU runtime's own host memory is not counted"}`;
}
