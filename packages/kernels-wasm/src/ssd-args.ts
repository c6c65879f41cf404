import { type SsdScanDims, ssdRowStrides } from "@kiln/contract";
import { callScratch } from "./call-scratch.js";
import type { WasmKernelContext } from "./kernel-table.js";

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

/** Flops of one token of one head in Mamba2's chunked scan: the chunk's C·B and mixing, the carried state in and out. */
export const ssdTokenFlops = (a: SsdScanDims) => 2 * (Math.min(a.chunkSize, a.seqLen) * (a.stateSize + a.headDim) + 4 * a.headDim * a.stateSize);

/** What a scan call's scratch holds: per thread `floatsPerThread` floats (a kernel's *_scratch_floats export), then `partialFloats` f32. */
export interface SsdScratch {
  threads: number;
  floatsPerThread: number;
  partialFloats: number;
}

/**
 * Takes the call's scratch (each thread its own block of whole cache lines, the backward's
 * partials after them), then clears SsdArgs and writes the dimensions, row strides, dtype and
 * the scratch's addresses (partials only when there are any). Returns the argument block's words.
 */
export function writeSsdArgs(ctx: WasmKernelContext, a: SsdScanDims, dtype: number, scratch: SsdScratch): Uint32Array {
  const stride = Math.ceil(scratch.floatsPerThread / 16) * 16;
  const ptr = callScratch(ctx.rt, (scratch.threads * stride + scratch.partialFloats) * 4); // before argsViews: it may grow the memory
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
  u32[SSD_FIELD.scratch] = ptr;
  u32[SSD_FIELD.scratchStride] = stride;
  if (scratch.partialFloats > 0) u32[SSD_FIELD.partials] = ptr + scratch.threads * stride * 4;
  return u32;
}
