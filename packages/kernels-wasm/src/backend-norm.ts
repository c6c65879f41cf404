import {
  FLOAT_DTYPES,
  type LayerNormBackwardArgs,
  type LayerNormForwardArgs,
  type RmsNormBackwardArgs,
  type RmsNormForwardArgs,
  layerNormBackwardSpec,
  layerNormForwardSpec,
  rmsNormBackwardSpec,
  rmsNormForwardSpec,
} from "@kiln/contract";
import { callScratch } from "./call-scratch.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { nativeRouting } from "./native-routing.js";

/** Word index of each field of NormForwardArgs in csrc/norm.c. */
const FWD = { rows: 0, dim: 1, dtype: 2, eps: 3, x: 4, weight: 5, bias: 6, out: 7, mean: 8, rstd: 9, residual: 10, sum: 11, weightOffset: 12 } as const;
/** Word index of each field of NormBackwardArgs in csrc/norm.c. */
const BWD = {
  rows: 0, dim: 1, dtype: 2, partials: 3, dOut: 4, x: 5, weight: 6, mean: 7, rstd: 8,
  dX: 9, dWeight: 10, dBias: 11, scratch: 12, scratchStride: 13, gradDtype: 14, dResidual: 15, dXColSums: 16, weightOffset: 17,
} as const;

/** The native backward's partial rows (at most; native/src/nest_norm.h), and its counter's word. */
const NATIVE_PARTIALS = 32;
const NATIVE_TICKETS = 32;

/** The norms that run natively: they read csrc/norm.c's blocks as they are. */
export const nativeNorms = nativeRouting("norm", {
  kiln_layer_norm_forward: "kiln_native_layer_norm_forward",
  kiln_layer_norm_backward: "kiln_native_layer_norm_backward",
  kiln_rms_norm_forward: "kiln_native_rms_norm_forward",
  kiln_rms_norm_backward: "kiln_native_rms_norm_backward",
});

/** Rough cost of one element in flops, to decide how many threads to wake. */
const FORWARD_COST = 8;
const BACKWARD_COST = 14;

function runLayerNormForward(ctx: WasmKernelContext, args: LayerNormForwardArgs): void {
  layerNormForwardSpec.check(args);
  const dtype = storageDtypeCode("layerNormForward", args.dtype);
  const at = operandAddresses(layerNormForwardSpec, ctx.memory, args);
  writeForwardArgs(ctx, args, dtype, at);
  ctx.rt.run(nativeNorms.entry(ctx.rt, "kiln_layer_norm_forward"), threadsForWork(ctx.rt, args.rows, args.dim * FORWARD_COST));
}

function runRmsNormForward(ctx: WasmKernelContext, args: RmsNormForwardArgs): void {
  rmsNormForwardSpec.check(args);
  const dtype = storageDtypeCode("rmsNormForward", args.dtype);
  const at = operandAddresses(rmsNormForwardSpec, ctx.memory, args);
  writeForwardArgs(ctx, args, dtype, at);
  ctx.rt.run(nativeNorms.entry(ctx.rt, "kiln_rms_norm_forward"), threadsForWork(ctx.rt, args.rows, args.dim * FORWARD_COST));
}

type Ranges = ReturnType<typeof operandAddresses>;

/** mean and bias are absent for rmsNorm (0 in the struct); residual and sum when not given. */
function writeForwardArgs(ctx: WasmKernelContext, args: RmsNormForwardArgs, dtype: number, at: Ranges): void {
  const { u32, f32 } = ctx.rt.argsViews();
  u32[FWD.rows] = args.rows;
  u32[FWD.dim] = args.dim;
  u32[FWD.dtype] = dtype;
  f32[FWD.eps] = args.eps;
  u32[FWD.x] = at.x.ptr;
  u32[FWD.weight] = at.weight.ptr;
  u32[FWD.bias] = at.bias?.ptr ?? 0;
  u32[FWD.out] = at.out.ptr;
  u32[FWD.mean] = at.mean?.ptr ?? 0;
  u32[FWD.rstd] = at.rstd.ptr;
  u32[FWD.residual] = at.residual?.ptr ?? 0;
  u32[FWD.sum] = at.sum?.ptr ?? 0;
  f32[FWD.weightOffset] = args.weightOffset ?? 0;
}

/**
 * The rows pass (each thread sums its rows' parameter gradients into its own f32
 * partial row of scratch), then the reduction of the partials, in thread order,
 * into dWeight (and dBias): the same bits on every run with the same threads.
 */
function runNormBackward(ctx: WasmKernelContext, args: RmsNormBackwardArgs, dtype: number, gradDtype: number, at: Ranges, layer: boolean): void {
  const { rt } = ctx;
  // Natively, partials fixed by the rows (drawn by the threads), so the sums do not depend on the threads.
  const native = rt.native?.norm === true;
  const partials = native ? Math.min(args.rows, NATIVE_PARTIALS) : threadsForWork(rt, args.rows, args.dim * BACKWARD_COST);
  const threads = native ? Math.min(partials, threadsForWork(rt, args.rows, args.dim * BACKWARD_COST)) : partials;
  const dim4 = Math.ceil(args.dim / 4) * 4;
  // dWeight, dBias and dX's column-sum partials, whole cache lines
  const strideFloats = Math.ceil(((args.dXColSums ? 3 : 2) * dim4) / 16) * 16;
  const scratch = callScratch(rt, partials * strideFloats * 4);
  const { u32, f32 } = rt.argsViews();
  f32[BWD.weightOffset] = args.weightOffset ?? 0;
  u32[BWD.rows] = args.rows;
  u32[BWD.dim] = args.dim;
  u32[BWD.dtype] = dtype;
  u32[BWD.partials] = partials;
  u32[BWD.dOut] = at.dOut.ptr;
  u32[BWD.x] = at.x.ptr;
  u32[BWD.weight] = at.weight.ptr;
  u32[BWD.mean] = at.mean?.ptr ?? 0;
  u32[BWD.rstd] = at.rstd.ptr;
  u32[BWD.dX] = at.dX.ptr;
  u32[BWD.dWeight] = at.dWeight.ptr;
  u32[BWD.dBias] = at.dBias?.ptr ?? 0;
  u32[BWD.scratch] = scratch;
  u32[BWD.scratchStride] = strideFloats;
  u32[BWD.gradDtype] = gradDtype;
  u32[BWD.dResidual] = at.dResidual?.ptr ?? 0;
  u32[BWD.dXColSums] = at.dXColSums?.ptr ?? 0;
  u32[NATIVE_TICKETS] = 0;
  rt.run(nativeNorms.entry(rt, layer ? "kiln_layer_norm_backward" : "kiln_rms_norm_backward"), threads);
  rt.run("kiln_norm_param_grad_reduce", threadsForWork(rt, Math.ceil(args.dim / 4), 8 * partials));
}

function runLayerNormBackward(ctx: WasmKernelContext, args: LayerNormBackwardArgs): void {
  layerNormBackwardSpec.check(args);
  const dtype = storageDtypeCode("layerNormBackward", args.dtype);
  const gradDtype = gradDtypeCode("layerNormBackward", args.dtype, args.gradDtype);
  runNormBackward(ctx, args, dtype, gradDtype, operandAddresses(layerNormBackwardSpec, ctx.memory, args), true);
}

function runRmsNormBackward(ctx: WasmKernelContext, args: RmsNormBackwardArgs): void {
  rmsNormBackwardSpec.check(args);
  const dtype = storageDtypeCode("rmsNormBackward", args.dtype);
  const gradDtype = gradDtypeCode("rmsNormBackward", args.dtype, args.gradDtype);
  runNormBackward(ctx, args, dtype, gradDtype, operandAddresses(rmsNormBackwardSpec, ctx.memory, args), false);
}

/** LayerNorm and RMSNorm (csrc/norm.c), forward and backward, in f32, bf16 and f16. */
export const NORM_KERNELS = {
  layerNormForward: { dtypes: FLOAT_DTYPES, run: runLayerNormForward },
  layerNormBackward: { dtypes: FLOAT_DTYPES, run: runLayerNormBackward },
  rmsNormForward: { dtypes: FLOAT_DTYPES, run: runRmsNormForward },
  rmsNormBackward: { dtypes: FLOAT_DTYPES, run: runRmsNormBackward },
} satisfies WasmKernelTable;
