import { type AddArgs, type DropoutArgs, FLOAT_DTYPES, type ScaleArgs, addSpec, dropoutScale, dropoutSpec, dropoutThreshold, scaleSpec } from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of ElementwiseArgs in csrc/elementwise.c. */
const FIELD = { a: 0, b: 1, out: 2, n: 3, dtype: 4, alpha: 5 } as const;
/** Elements per unit of work: threads split at multiples of this (CHUNK_ALIGN in C). */
const CHUNK = 32;
/** Rough cost of one element in flops, to decide how many threads to wake. */
const ADD_COST = 16;
const SCALE_COST = 12;

function runAdd(ctx: WasmKernelContext, args: AddArgs): void {
  addSpec.check(args);
  const dtype = storageDtypeCode("add", args.dtype);
  const at = operandAddresses(addSpec, ctx.memory, args);
  const { u32 } = ctx.rt.argsViews();
  u32[FIELD.a] = at.a.ptr;
  u32[FIELD.b] = at.b.ptr;
  u32[FIELD.out] = at.out.ptr;
  u32[FIELD.n] = args.n;
  u32[FIELD.dtype] = dtype;
  ctx.rt.run("kiln_add", threadsForWork(ctx.rt, Math.ceil(args.n / CHUNK), CHUNK * ADD_COST));
}

function runScale(ctx: WasmKernelContext, args: ScaleArgs): void {
  scaleSpec.check(args);
  const dtype = storageDtypeCode("scale", args.dtype);
  const at = operandAddresses(scaleSpec, ctx.memory, args);
  const { u32, f32 } = ctx.rt.argsViews();
  u32[FIELD.a] = at.x.ptr;
  u32[FIELD.b] = 0;
  u32[FIELD.out] = at.out.ptr;
  u32[FIELD.n] = args.n;
  u32[FIELD.dtype] = dtype;
  f32[FIELD.alpha] = args.alpha;
  ctx.rt.run("kiln_scale", threadsForWork(ctx.rt, Math.ceil(args.n / CHUNK), CHUNK * SCALE_COST));
}

/** Word index of each field of DropoutArgs in csrc/elementwise.c. */
const DROPOUT = { x: 0, out: 1, n: 2, dtype: 3, seed: 4, threshold: 5, scale: 6 } as const;
const DROPOUT_COST = 24;

function runDropout(ctx: WasmKernelContext, args: DropoutArgs): void {
  dropoutSpec.check(args);
  const dtype = storageDtypeCode("dropout", args.dtype);
  const at = operandAddresses(dropoutSpec, ctx.memory, args);
  const { u32, f32 } = ctx.rt.argsViews();
  u32[DROPOUT.x] = at.x.ptr;
  u32[DROPOUT.out] = at.out.ptr;
  u32[DROPOUT.n] = args.n;
  u32[DROPOUT.dtype] = dtype;
  u32[DROPOUT.seed] = args.seed;
  u32[DROPOUT.threshold] = dropoutThreshold(args.p);
  f32[DROPOUT.scale] = dropoutScale(args.p);
  ctx.rt.run("kiln_dropout", threadsForWork(ctx.rt, Math.ceil(args.n / CHUNK), CHUNK * DROPOUT_COST));
}

/** add, scale and dropout (csrc/elementwise.c) in f32, bf16 and f16. */
export const ELEMENTWISE_KERNELS = {
  add: { dtypes: FLOAT_DTYPES, run: runAdd },
  scale: { dtypes: FLOAT_DTYPES, run: runScale },
  dropout: { dtypes: FLOAT_DTYPES, run: runDropout },
} satisfies WasmKernelTable;
