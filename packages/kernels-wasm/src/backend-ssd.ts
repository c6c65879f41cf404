import {
  FLOAT_DTYPES,
  type SsdScanBackwardArgs,
  type SsdScanDims,
  type SsdScanForwardArgs,
  ssdRowStrides,
  ssdScanBackwardSpec,
  ssdScanForwardSpec,
} from "@kiln/contract";
import { callScratch } from "./call-scratch.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of SsdArgs in csrc/ssd.h (Mamba3Args in csrc/mamba3.h starts with one). */
export const SSD_FIELD = {
  x: 0,
  dt: 1,
  dtBias: 2,
  aLog: 3,
  B: 4,
  C: 5,
  D: 6,
  y: 7,
  states: 8,
  dY: 9,
  dX: 10,
  dDt: 11,
  dB: 12,
  dC: 13,
  dDtBias: 14,
  dALog: 15,
  dD: 16,
  scratch: 17,
  partials: 18,
  scratchStride: 19,
  batch: 20,
  seqLen: 21,
  heads: 22,
  headDim: 23,
  groups: 24,
  stateSize: 25,
  chunkSize: 26,
  xRowStride: 27,
  dtRowStride: 28,
  bcRowStride: 29,
  dtype: 30,
  gradDtype: 31,
} as const;

/** Flops of one token of one head: the chunk's C·B and mixing, the carried state in and out. */
const tokenFlops = (a: SsdScanDims) => 2 * (Math.min(a.chunkSize, a.seqLen) * (a.stateSize + a.headDim) + 4 * a.headDim * a.stateSize);

/**
 * Scratch for `threads` threads (each its own block, kiln_ssd_scan_scratch_floats floats,
 * whole cache lines) and, after them, `partialFloats` f32 for the backward's partials.
 * Returns the block's address, the per-thread stride in floats and the partials' address.
 */
function scratchFor(rt: KernelRuntime, a: SsdScanDims, threads: number, backward: boolean, partialFloats: number) {
  const floats = rt.exports.kiln_ssd_scan_scratch_floats as (seqLen: number, headDim: number, stateSize: number, chunkSize: number, backward: number) => number;
  const stride = Math.ceil(floats(a.seqLen, a.headDim, a.stateSize, a.chunkSize, backward ? 1 : 0) / 16) * 16;
  const ptr = callScratch(rt, (threads * stride + partialFloats) * 4);
  return { ptr, stride, partials: ptr + threads * stride * 4 };
}

/** Clears SsdArgs and writes the dimensions, row strides and dtype; returns the argument block's words. */
export function writeSsdDims(ctx: WasmKernelContext, a: SsdScanDims, dtype: number): Uint32Array {
  const { u32 } = ctx.rt.argsViews();
  const s = ssdRowStrides(a);
  u32.fill(0, 0, SSD_FIELD.gradDtype + 1);
  u32[SSD_FIELD.batch] = a.batch;
  u32[SSD_FIELD.seqLen] = a.seqLen;
  u32[SSD_FIELD.heads] = a.heads;
  u32[SSD_FIELD.headDim] = a.headDim;
  u32[SSD_FIELD.groups] = a.groups;
  u32[SSD_FIELD.stateSize] = a.stateSize;
  u32[SSD_FIELD.chunkSize] = a.chunkSize;
  u32[SSD_FIELD.xRowStride] = s.x;
  u32[SSD_FIELD.dtRowStride] = s.dt;
  u32[SSD_FIELD.bcRowStride] = s.bc;
  u32[SSD_FIELD.dtype] = dtype;
  return u32;
}

/** Threads take (batch, head) pairs, each a whole sequence of chunks. */
function runForward(ctx: WasmKernelContext, args: SsdScanForwardArgs): void {
  ssdScanForwardSpec.check(args);
  const dtype = storageDtypeCode("ssdScanForward", args.dtype);
  const at = operandAddresses(ssdScanForwardSpec, ctx.memory, args);
  const pairs = args.batch * args.heads;
  const threads = threadsForWork(ctx.rt, pairs, args.seqLen * tokenFlops(args));
  const scratch = scratchFor(ctx.rt, args, threads, false, 0);
  const u32 = writeSsdDims(ctx, args, dtype);
  for (const k of ["x", "dt", "dtBias", "aLog", "B", "C", "D", "y", "states"] as const) u32[SSD_FIELD[k]] = at[k].ptr;
  u32[SSD_FIELD.scratch] = scratch.ptr;
  u32[SSD_FIELD.scratchStride] = scratch.stride;
  ctx.rt.run("kiln_ssd_scan_forward", threads);
}

/**
 * Threads take (batch, group) pairs and run the group's heads in ascending order, so
 * dB and dC (summed over the heads) have one writer. Each (batch, head) leaves its
 * parameter-gradient sums in scratch; kiln_ssd_scan_param_reduce adds them over the
 * batch in order, once into dDtBias / dALog / dD: the same bits whatever the threads.
 */
function runBackward(ctx: WasmKernelContext, args: SsdScanBackwardArgs): void {
  ssdScanBackwardSpec.check(args);
  const dtype = storageDtypeCode("ssdScanBackward", args.dtype);
  const at = operandAddresses(ssdScanBackwardSpec, ctx.memory, args);
  const pairs = args.batch * args.groups;
  const threads = threadsForWork(ctx.rt, pairs, (2 * args.heads * args.seqLen * tokenFlops(args)) / args.groups);
  const scratch = scratchFor(ctx.rt, args, threads, true, args.batch * args.heads * 3);
  const u32 = writeSsdDims(ctx, args, dtype);
  for (const k of ["dY", "x", "dt", "dtBias", "aLog", "B", "C", "D", "states", "dX", "dDt", "dB", "dC", "dDtBias", "dALog", "dD"] as const) u32[SSD_FIELD[k]] = at[k].ptr;
  u32[SSD_FIELD.scratch] = scratch.ptr;
  u32[SSD_FIELD.partials] = scratch.partials;
  u32[SSD_FIELD.scratchStride] = scratch.stride;
  u32[SSD_FIELD.gradDtype] = gradDtypeCode("ssdScanBackward", args.dtype, args.gradDtype);
  ctx.rt.run("kiln_ssd_scan_backward", threads);
  ctx.rt.run("kiln_ssd_scan_param_reduce", 1);
}

/** ssdScanForward and ssdScanBackward (csrc/ssd.c, csrc/ssd_backward.c) in f32, bf16 and f16. */
export const SSD_KERNELS = {
  ssdScanForward: { dtypes: FLOAT_DTYPES, run: runForward },
  ssdScanBackward: { dtypes: FLOAT_DTYPES, run: runBackward },
} satisfies WasmKernelTable;
