import { attentionPairs } from "@kiln/contract";
import { type AttentionCall, runAttentionBackward, runAttentionForward } from "./attention-call.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { threadsFor } from "./matmul-call.js";
import { storageDtypeCode } from "./storage-dtype.js";

/** Word index of each field of the native attention block (native/src/attention_args.cc). */
const WORD = {
  batch: 0, seqLen: 1, heads: 2, kvHeads: 3, headDim: 4, vHeadDim: 5,
  qRowStride: 6, kvRowStride: 7, vRowStride: 8, outRowStride: 9, scale: 10, window: 11, dtype: 12,
  q: 13, k: 14, v: 15, out: 16, lse: 17, dOut: 18, dQ: 19, dK: 20, dV: 21, tickets: 32,
} as const;

/** Queries in a forward work unit of the native kernel (kAttnBQ in native/src/nest_attention.h). */
const NATIVE_BLOCK_QUERIES = 48;

let nativeCalls = 0;

/** Attention calls this process has run on the native kernels so far (tests check that the native path ran). */
export function nativeAttentionCalls(): number {
  return nativeCalls;
}

function writeNativeArgs(rt: KernelRuntime, call: AttentionCall): void {
  const { u32, f32 } = rt.argsViews();
  for (const key of ["batch", "seqLen", "heads", "kvHeads", "headDim", "vHeadDim", "qRowStride", "kvRowStride", "vRowStride", "outRowStride", "window"] as const) {
    u32[WORD[key]] = call[key];
  }
  f32[WORD.scale] = call.scale;
  u32[WORD.dtype] = storageDtypeCode("attention", call.dtype);
  for (const key of ["q", "k", "v", "out", "lse", "dOut", "dQ", "dK", "dV"] as const) u32[WORD[key]] = call[key];
  u32[WORD.tickets] = 0;
}

const flops = (call: AttentionCall) => 2 * attentionPairs(call) * (call.headDim + call.vHeadDim);

/**
 * Attention forward on the runtime's pool: on the native kernels when the runtime loaded
 * them and the call has no document boundaries (`docStarts`, address 0 when absent), else
 * the WebAssembly kernel.
 */
export function dispatchAttentionForward(rt: KernelRuntime, call: AttentionCall): void {
  if (!rt.native?.attention || call.docStarts !== 0) {
    runAttentionForward(rt, call);
    return;
  }
  writeNativeArgs(rt, call);
  const units = call.batch * call.heads * Math.ceil(call.seqLen / NATIVE_BLOCK_QUERIES);
  rt.run("kiln_native_attention_forward", Math.min(units, threadsFor(flops(call), rt.info.threads, rt.info.minFlopsPerThread)));
  nativeCalls++;
}

/** Attention backward, chosen as the forward is; work units are (batch, kv head) pairs. */
export function dispatchAttentionBackward(rt: KernelRuntime, call: AttentionCall): void {
  if (!rt.native?.attention || call.docStarts !== 0) {
    runAttentionBackward(rt, call);
    return;
  }
  writeNativeArgs(rt, call);
  const pairs = call.batch * call.kvHeads;
  rt.run("kiln_native_attention_backward", Math.min(pairs, threadsFor(2.5 * flops(call), rt.info.threads, rt.info.minFlopsPerThread)));
  nativeCalls++;
}
