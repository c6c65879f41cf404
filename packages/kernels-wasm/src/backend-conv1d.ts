import {
  type Conv1dCausalBackwardArgs,
  type Conv1dCausalForwardArgs,
  FLOAT_DTYPES,
  conv1dCausalBackwardSpec,
  conv1dCausalForwardSpec,
  conv1dRowStride,
} from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of Conv1dArgs in csrc/conv1d.c. */
const FIELD = {
  x: 0,
  weight: 1,
  bias: 2,
  out: 3,
  dOut: 4,
  dX: 5,
  dWeight: 6,
  dBias: 7,
  batch: 8,
  seqLen: 9,
  channels: 10,
  kernelSize: 11,
  rowStride: 12,
  dtype: 13,
  gradDtype: 14,
} as const;

type Dims = Pick<Conv1dCausalForwardArgs, "batch" | "seqLen" | "channels" | "kernelSize" | "rowStride">;

function writeDims(ctx: WasmKernelContext, a: Dims, dtype: number): Uint32Array {
  const { u32 } = ctx.rt.argsViews();
  u32.fill(0, 0, FIELD.gradDtype + 1);
  u32[FIELD.batch] = a.batch;
  u32[FIELD.seqLen] = a.seqLen;
  u32[FIELD.channels] = a.channels;
  u32[FIELD.kernelSize] = a.kernelSize;
  u32[FIELD.rowStride] = conv1dRowStride(a);
  u32[FIELD.dtype] = dtype;
  return u32;
}

function runForward(ctx: WasmKernelContext, args: Conv1dCausalForwardArgs): void {
  conv1dCausalForwardSpec.check(args);
  const dtype = storageDtypeCode("conv1dCausalForward", args.dtype);
  const at = operandAddresses(conv1dCausalForwardSpec, ctx.memory, args);
  const u32 = writeDims(ctx, args, dtype);
  u32[FIELD.x] = at.x.ptr;
  u32[FIELD.weight] = at.weight.ptr;
  u32[FIELD.bias] = at.bias?.ptr ?? 0;
  u32[FIELD.out] = at.out.ptr;
  // Threads take rows of (b, t): 2K flops per channel.
  ctx.rt.run("kiln_conv1d_causal_forward", threadsForWork(ctx.rt, args.batch * args.seqLen, 2 * args.kernelSize * args.channels));
}

/**
 * Threads take whole vectors of channels and own their dX, dWeight and dBias outright:
 * each parameter gradient is one thread's sum over (b, t) in a fixed order, so the bits
 * do not depend on the thread count.
 */
function runBackward(ctx: WasmKernelContext, args: Conv1dCausalBackwardArgs): void {
  conv1dCausalBackwardSpec.check(args);
  const dtype = storageDtypeCode("conv1dCausalBackward", args.dtype);
  const at = operandAddresses(conv1dCausalBackwardSpec, ctx.memory, args);
  const u32 = writeDims(ctx, args, dtype);
  u32[FIELD.x] = at.x.ptr;
  u32[FIELD.weight] = at.weight.ptr;
  u32[FIELD.dOut] = at.dOut.ptr;
  u32[FIELD.dX] = at.dX.ptr;
  u32[FIELD.dWeight] = at.dWeight.ptr;
  u32[FIELD.dBias] = at.dBias?.ptr ?? 0;
  u32[FIELD.gradDtype] = gradDtypeCode("conv1dCausalBackward", args.dtype, args.gradDtype);
  const vectors = Math.ceil(args.channels / 4);
  ctx.rt.run("kiln_conv1d_causal_backward", threadsForWork(ctx.rt, vectors, 16 * args.kernelSize * args.batch * args.seqLen));
}

/** conv1dCausalForward and conv1dCausalBackward (csrc/conv1d.c) in f32, bf16 and f16. */
export const CONV1D_KERNELS = {
  conv1dCausalForward: { dtypes: FLOAT_DTYPES, run: runForward },
  conv1dCausalBackward: { dtypes: FLOAT_DTYPES, run: runBackward },
} satisfies WasmKernelTable;
