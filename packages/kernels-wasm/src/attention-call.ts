import { type FloatDType, attentionPairs } from "@kiln/contract";
import type { KernelRuntime } from "./kernel-runtime.js";
import { threadsFor } from "./matmul-call.js";
import { storageDtypeCode } from "./storage-dtype.js";

/**
 * One attention call on operands already in linear memory (byte offsets),
 * mirroring AttentionArgs in csrc/attention.c. Strides are in elements.
 */
export interface AttentionCall {
  batch: number;
  seqLen: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vHeadDim: number;
  qRowStride: number;
  kvRowStride: number;
  vRowStride: number;
  outRowStride: number;
  scale: number;
  /** Keys each query sees, its own included: min(window, seqLen). */
  window: number;
  dtype: FloatDType;
  q: number;
  k: number;
  v: number;
  out: number;
  lse: number;
  /** Backward only (0 in the forward). */
  dOut: number;
  dQ: number;
  dK: number;
  dV: number;
  /** Packed rows: where each token's document begins (i32, batch x seqLen); 0 without. */
  docStarts: number;
}

/** Index (in 4-byte words) of each field of AttentionArgs in csrc/attention.c. */
const FIELD = {
  batch: 0, seqLen: 1, heads: 2, kvHeads: 3, headDim: 4, vHeadDim: 5,
  qRowStride: 6, kvRowStride: 7, vRowStride: 8, outRowStride: 9, scale: 10, dtype: 11,
  q: 12, k: 13, v: 14, out: 15, lse: 16, dOut: 17, dQ: 18, dK: 19, dV: 20,
  scratch: 21, scratchStride: 22, window: 23, docStarts: 24,
} as const;

/** Per-thread scratch of the attention kernels, grown on demand and kept with the runtime. */
const scratchOf = new WeakMap<KernelRuntime, { ptr: number; stride: number }>();

function attentionScratch(rt: KernelRuntime, bytesPerThread: number): { ptr: number; stride: number } {
  const stride = Math.ceil(bytesPerThread / 64) * 64;
  const have = scratchOf.get(rt);
  if (have && have.stride >= stride) return have;
  if (have) rt.heap.release(have.ptr);
  scratchOf.delete(rt);
  const next = { ptr: rt.heap.alloc(stride * rt.info.threads), stride };
  scratchOf.set(rt, next);
  return next;
}

function scratchBytes(rt: KernelRuntime, call: AttentionCall, backward: boolean): number {
  const fn = rt.exports.kiln_attention_scratch_bytes as (seqLen: number, headDim: number, vHeadDim: number, backward: number) => number;
  return fn(call.seqLen, call.headDim, call.vHeadDim, backward ? 1 : 0) >>> 0;
}

function writeAttentionArgs(rt: KernelRuntime, call: AttentionCall, scratch: { ptr: number; stride: number }): void {
  const { u32, f32 } = rt.argsViews();
  for (const key of ["batch", "seqLen", "heads", "kvHeads", "headDim", "vHeadDim", "qRowStride", "kvRowStride", "vRowStride", "outRowStride"] as const) {
    u32[FIELD[key]] = call[key];
  }
  f32[FIELD.scale] = call.scale;
  u32[FIELD.dtype] = storageDtypeCode("attention", call.dtype);
  for (const key of ["q", "k", "v", "out", "lse", "dOut", "dQ", "dK", "dV"] as const) u32[FIELD[key]] = call[key];
  u32[FIELD.scratch] = scratch.ptr;
  u32[FIELD.scratchStride] = scratch.stride;
  u32[FIELD.window] = call.window;
  u32[FIELD.docStarts] = call.docStarts;
}

/** Multiply-adds x 2 of the forward over the pairs the mask keeps (the contract's count): q·k over headDim, p·v over vHeadDim. */
function attentionFlops(call: AttentionCall): number {
  return 2 * attentionPairs(call) * (call.headDim + call.vHeadDim);
}

/** out, lse = causal (or sliding-window) attention of q, k, v. Work is split over (batch, head, query block). */
export function runAttentionForward(rt: KernelRuntime, call: AttentionCall, maxThreads?: number): void {
  const scratch = attentionScratch(rt, scratchBytes(rt, call, false));
  writeAttentionArgs(rt, call, scratch);
  const blockQueries = (rt.exports.kiln_attention_block_queries as () => number)();
  const units = call.batch * call.heads * Math.ceil(call.seqLen / blockQueries);
  const threads = threadsFor(attentionFlops(call), rt.info.threads, rt.info.minFlopsPerThread, maxThreads);
  rt.run("kiln_attention_forward", Math.min(threads, units));
}

/** dQ, dK, dV of causal attention. Work is split over (batch, kv head) pairs. */
export function runAttentionBackward(rt: KernelRuntime, call: AttentionCall, maxThreads?: number): void {
  const scratch = attentionScratch(rt, scratchBytes(rt, call, true));
  writeAttentionArgs(rt, call, scratch);
  const pairs = call.batch * call.kvHeads;
  const threads = threadsFor(2.5 * attentionFlops(call), rt.info.threads, rt.info.minFlopsPerThread, maxThreads);
  rt.run("kiln_attention_backward", Math.min(threads, pairs));
}
