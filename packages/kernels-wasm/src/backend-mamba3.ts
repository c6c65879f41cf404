import {
  FLOAT_DTYPES,
  type Mamba3ScanBackwardArgs,
  type Mamba3ScanDims,
  type Mamba3ScanForwardArgs,
  mamba3Rotates,
  mamba3ScanBackwardSpec,
  mamba3ScanForwardSpec,
} from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { operandAddresses } from "./operand-addresses.js";
import { SSD_FIELD, ssdTokenFlops, writeSsdArgs } from "./ssd-args.js";
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

/** Flops of one token of one head: Mamba2's, and the rotation. */
const tokenFlops = (a: Mamba3ScanDims) => ssdTokenFlops(a) + 16 * a.stateSize;

/** Floats of one thread's scratch (kiln_mamba3_scan_{forward,backward}_scratch_floats). */
function scratchFloats(rt: KernelRuntime, a: Mamba3ScanDims, backward: boolean): number {
  const name = backward ? "kiln_mamba3_scan_backward_scratch_floats" : "kiln_mamba3_scan_forward_scratch_floats";
  const floats = rt.exports[name] as (seqLen: number, headDim: number, stateSize: number, chunkSize: number) => number;
  return floats(a.seqLen, a.headDim, a.stateSize, a.chunkSize);
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
  const u32 = writeSsdArgs(ctx, args, dtype, { threads, floatsPerThread: scratchFloats(ctx.rt, args, false), partialFloats: 0 });
  u32.fill(0, FIELD.lambda, FIELD.rotates + 1);
  writeInputs(u32, at, mamba3Rotates(args));
  u32[FIELD.y] = at.y.ptr;
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
  const scratch = { threads, floatsPerThread: scratchFloats(ctx.rt, args, true), partialFloats: args.batch * args.heads * partialsPerHead(args) };
  const u32 = writeSsdArgs(ctx, args, dtype, scratch);
  u32.fill(0, FIELD.lambda, FIELD.rotates + 1);
  writeInputs(u32, at, rotates);
  for (const k of ["dY", "dX", "dDt", "dB", "dC", "dDtBias", "dALog", "dD", "dLambda", "dBBias", "dCBias"] as const) u32[FIELD[k]] = at[k].ptr;
  u32[FIELD.dTheta] = rotates ? at.dTheta.ptr : 0;
  u32[FIELD.gradDtype] = gradDtypeCode("mamba3ScanBackward", args.dtype, args.gradDtype);
  ctx.rt.run("kiln_mamba3_scan_backward", threads);
  ctx.rt.run("kiln_mamba3_scan_param_reduce", 1);
}

/** mamba3ScanForward and mamba3ScanBackward (csrc/mamba3.c, csrc/mamba3_backward.c) in f32, bf16 and f16. */
export const MAMBA3_KERNELS = {
  mamba3ScanForward: { dtypes: FLOAT_DTYPES, run: runForward },
  mamba3ScanBackward: { dtypes: FLOAT_DTYPES, run: runBackward },
} satisfies WasmKernelTable;
