import {
  FLOAT_DTYPES,
  type SsdScanBackwardArgs,
  type SsdScanDims,
  type SsdScanForwardArgs,
  ssdScanBackwardSpec,
  ssdScanForwardSpec,
} from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { operandAddresses } from "./operand-addresses.js";
import { SSD_FIELD, ssdTokenFlops, writeSsdArgs } from "./ssd-args.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Floats of one thread's scratch (kiln_ssd_scan_scratch_floats). */
function scratchFloats(rt: KernelRuntime, a: SsdScanDims, backward: boolean): number {
  const floats = rt.exports.kiln_ssd_scan_scratch_floats as (seqLen: number, headDim: number, stateSize: number, chunkSize: number, backward: number) => number;
  return floats(a.seqLen, a.headDim, a.stateSize, a.chunkSize, backward ? 1 : 0);
}

/** Threads take (batch, head) pairs, each a whole sequence of chunks. */
function runForward(ctx: WasmKernelContext, args: SsdScanForwardArgs): void {
  ssdScanForwardSpec.check(args);
  const dtype = storageDtypeCode("ssdScanForward", args.dtype);
  const at = operandAddresses(ssdScanForwardSpec, ctx.memory, args);
  const threads = threadsForWork(ctx.rt, args.batch * args.heads, args.seqLen * ssdTokenFlops(args));
  const u32 = writeSsdArgs(ctx, args, dtype, { threads, floatsPerThread: scratchFloats(ctx.rt, args, false), partialFloats: 0 });
  for (const k of ["x", "dt", "dtBias", "aLog", "B", "C", "D", "y", "states"] as const) u32[SSD_FIELD[k]] = at[k].ptr;
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
  const threads = threadsForWork(ctx.rt, args.batch * args.groups, (2 * args.heads * args.seqLen * ssdTokenFlops(args)) / args.groups);
  const scratch = { threads, floatsPerThread: scratchFloats(ctx.rt, args, true), partialFloats: args.batch * args.heads * 3 };
  const u32 = writeSsdArgs(ctx, args, dtype, scratch);
  for (const k of ["dY", "x", "dt", "dtBias", "aLog", "B", "C", "D", "states", "dX", "dDt", "dB", "dC", "dDtBias", "dALog", "dD"] as const) u32[SSD_FIELD[k]] = at[k].ptr;
  u32[SSD_FIELD.gradDtype] = gradDtypeCode("ssdScanBackward", args.dtype, args.gradDtype);
  ctx.rt.run("kiln_ssd_scan_backward", threads);
  ctx.rt.run("kiln_ssd_scan_param_reduce", 1);
}

/** ssdScanForward and ssdScanBackward (csrc/ssd.c, csrc/ssd_backward.c) in f32, bf16 and f16. */
export const SSD_KERNELS = {
  ssdScanForward: { dtypes: FLOAT_DTYPES, run: runForward },
  ssdScanBackward: { dtypes: FLOAT_DTYPES, run: runBackward },
} satisfies WasmKernelTable;
