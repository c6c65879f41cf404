import { type AdamWArgs, FLOAT_DTYPES, adamWSpec } from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of AdamWArgs in csrc/adamw.c. */
const FIELD = {
  param: 0, grad: 1, m: 2, v: 3, master: 4, n: 5, dtype: 6,
  beta1: 7, oneMinusBeta1: 8, beta2: 9, oneMinusBeta2: 10, eps: 11, decay: 12, stepSize: 13, invSqrtBc2: 14, gradScale: 15, gradDtype: 16,
} as const;
/** Elements per unit of work: threads split at multiples of this (CHUNK_ALIGN in C). */
const CHUNK = 32;
/** Rough cost of one element in flops (five streams, a sqrt and a divide), to decide how many threads to wake. */
const ELEMENT_COST = 48;

function runAdamW(ctx: WasmKernelContext, args: AdamWArgs): void {
  adamWSpec.check(args);
  const dtype = storageDtypeCode("adamW", args.dtype);
  const gradDtype = gradDtypeCode("adamW", args.dtype, args.gradDtype);
  const at = operandAddresses(adamWSpec, ctx.memory, args);
  // Bias corrections and the other per-call factors in f64, rounded once to f32 by the view.
  const bc1 = 1 - args.beta1 ** args.step;
  const bc2 = 1 - args.beta2 ** args.step;
  const { u32, f32 } = ctx.rt.argsViews();
  u32[FIELD.param] = at.param.ptr;
  u32[FIELD.grad] = at.grad.ptr;
  u32[FIELD.m] = at.m.ptr;
  u32[FIELD.v] = at.v.ptr;
  u32[FIELD.master] = at.master?.ptr ?? 0;
  u32[FIELD.n] = args.n;
  u32[FIELD.dtype] = dtype;
  f32[FIELD.beta1] = args.beta1;
  f32[FIELD.oneMinusBeta1] = 1 - args.beta1;
  f32[FIELD.beta2] = args.beta2;
  f32[FIELD.oneMinusBeta2] = 1 - args.beta2;
  f32[FIELD.eps] = args.eps;
  f32[FIELD.decay] = 1 - args.lr * args.weightDecay;
  f32[FIELD.stepSize] = args.lr / bc1;
  f32[FIELD.invSqrtBc2] = 1 / Math.sqrt(bc2);
  f32[FIELD.gradScale] = args.gradScale ?? 1;
  u32[FIELD.gradDtype] = gradDtype;
  ctx.rt.run("kiln_adamw", threadsForWork(ctx.rt, Math.ceil(args.n / CHUNK), CHUNK * ELEMENT_COST));
}

/** The fused AdamW step (csrc/adamw.c): param and grad in f32, bf16 or f16 (grad f32 beside 16-bit params too); m, v and master in f32. */
export const ADAMW_KERNELS = {
  adamW: { dtypes: FLOAT_DTYPES, run: runAdamW },
} satisfies WasmKernelTable;
