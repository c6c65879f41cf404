import {
  FLOAT_DTYPES,
  type Mamba3ScanBackwardArgs,
  type Mamba3ScanDims,
  type Mamba3ScanForwardArgs,
  mamba3Rotates,
  mamba3ScanBackwardSpec,
  mamba3ScanForwardSpec,
} from "@kiln/contract";
import { SSD_FIELD, writeSsdDims } from "./backend-ssd.js";
import { callScratch } from "./call-scratch.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of Mamba3Args in csrc/mamba3.h: SsdArgs, then Mamba3's own. */
const FIELD = {
  ...SSD_FIELD,
  lambda: 32,
  theta: 33,
  bBias: 34,
  cBias: 35,
  dLambda: 36,
  dTheta: 37,
  dBBias: 38,
  dCBias: 39,
  rotates: 40,
} as const;

/** f32 partials of one (batch, head) in the backward: dDtBias, dALog, dD, dBBias and dCBias (M3_PARTIALS). */
const partialsPerHead = (a: Mamba3ScanDims) => 3 + 2 * a.stateSize;

/** Flops of one token of one head: the chunk's C·B and mixing, the carried state in and out, the rotation. */
const tokenFlops = (a: Mamba3ScanDims) =>
  2 * (Math.min(a.chunkSize, a.seqLen) * (a.stateSize + a.headDim) + 4 * a.headDim * a.stateSize + 8 * a.stateSize);

type ScratchExport = (seqLen: number, headDim: number, stateSize: number, chunkSize: number) => number;

/**
 * Scratch for `threads` threads (each its own block of whole cache lines, as many floats as
 * the kernel's *_scratch_floats export says) and, after them, `partialFloats` f32 for the
 * backward's partials. Returns the block's address, the per-thread stride in floats and
 * the partials' address.
 */
function scratchFor(rt: KernelRuntime, a: Mamba3ScanDims, threads: number, backward: boolean, partialFloats: number) {
  const name = backward ? "kiln_mamba3_scan_backward_scratch_floats" : "kiln_mamba3_scan_forward_scratch_floats";
  const floats = rt.exports[name] as ScratchExport;
  const stride = Math.ceil(floats(a.seqLen, a.headDim, a.stateSize, a.chunkSize) / 16) * 16;
  const ptr = callScratch(rt, (threads * stride + partialFloats) * 4);
  return { ptr, stride, partials: ptr + threads * stride * 4 };
}

/** The inputs both kernels read: SsdArgs' fields, then λ, θ (0 without rotation) and the bias rows. */
function writeInputs(u32: Uint32Array, at: Record<string, { ptr: number }>, rotates: boolean): void {
  for (const k of ["x", "dt", "dtBias", "aLog", "B", "C", "D", "states"] as const) u32[FIELD[k]] = at[k].ptr;
  u32[FIELD.lambda] = at.lambda.ptr;
  u32[FIELD.theta] = rotates ? at.theta.ptr : 0;
  u32[FIELD.bBias] = at.bBias.ptr;
  u32[FIELD.cBias] = at.cBias.ptr;
  u32[FIELD.rotates] = rotates ? 1 : 0;
}

/** Threads take (batch, head) pairs, each a whole sequence of chunks. */
function runForward(ctx: WasmKernelContext, args: Mamba3ScanForwardArgs): void {
  mamba3ScanForwardSpec.check(args);
  const dtype = storageDtypeCode("mamba3ScanForward", args.dtype);
  const at = operandAddresses(mamba3ScanForwardSpec, ctx.memory, args);
  const threads = threadsForWork(ctx.rt, args.batch * args.heads, args.seqLen * tokenFlops(args));
  const scratch = scratchFor(ctx.rt, args, threads, false, 0);
  const u32 = writeSsdDims(ctx, args, dtype);
  u32.fill(0, FIELD.lambda, FIELD.rotates + 1);
  writeInputs(u32, at, mamba3Rotates(args));
  u32[FIELD.y] = at.y.ptr;
  u32[FIELD.scratch] = scratch.ptr;
  u32[FIELD.scratchStride] = scratch.stride;
  ctx.rt.run("kiln_mamba3_scan_forward", threads);
}

/**
 * Threads take (batch, group) pairs and run the group's heads in ascending order, so
 * dB and dC (summed over the heads) have one writer. Each (batch, head) leaves its
 * parameter-gradient sums in scratch; kiln_mamba3_scan_param_reduce adds them over the
 * batch in order, once into dDtBias / dALog / dD / dBBias / dCBias: the same bits
 * whatever the threads.
 */
function runBackward(ctx: WasmKernelContext, args: Mamba3ScanBackwardArgs): void {
  mamba3ScanBackwardSpec.check(args);
  const dtype = storageDtypeCode("mamba3ScanBackward", args.dtype);
  const at = operandAddresses(mamba3ScanBackwardSpec, ctx.memory, args);
  const rotates = mamba3Rotates(args);
  const threads = threadsForWork(ctx.rt, args.batch * args.groups, (2 * args.heads * args.seqLen * tokenFlops(args)) / args.groups);
  const scratch = scratchFor(ctx.rt, args, threads, true, args.batch * args.heads * partialsPerHead(args));
  const u32 = writeSsdDims(ctx, args, dtype);
  u32.fill(0, FIELD.lambda, FIELD.rotates + 1);
  writeInputs(u32, at, rotates);
  for (const k of ["dY", "dX", "dDt", "dB", "dC", "dDtBias", "dALog", "dD", "dLambda", "dBBias", "dCBias"] as const) u32[FIELD[k]] = at[k].ptr;
  u32[FIELD.dTheta] = rotates ? at.dTheta.ptr : 0;
  u32[FIELD.scratch] = scratch.ptr;
  u32[FIELD.partials] = scratch.partials;
  u32[FIELD.scratchStride] = scratch.stride;
  u32[FIELD.gradDtype] = gradDtypeCode("mamba3ScanBackward", args.dtype, args.gradDtype);
  ctx.rt.run("kiln_mamba3_scan_backward", threads);
  ctx.rt.run("kiln_mamba3_scan_param_reduce", 1);
}

/** mamba3ScanForward and mamba3ScanBackward (csrc/mamba3.c, csrc/mamba3_backward.c) in f32, bf16 and f16. */
export const MAMBA3_KERNELS = {
  mamba3ScanForward: { dtypes: FLOAT_DTYPES, run: runForward },
  mamba3ScanBackward: { dtypes: FLOAT_DTYPES, run: runBackward },
} satisfies WasmKernelTable;
