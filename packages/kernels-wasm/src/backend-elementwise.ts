import { type AddArgs, FLOAT_DTYPES, type ScaleArgs, addSpec, scaleSpec } from "@kiln/contract";
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

/** add and scale (csrc/elementwise.c) in f32, bf16 and f16. */
export const ELEMENTWISE_KERNELS = {
  add: { dtypes: FLOAT_DTYPES, run: runAdd },
  scale: { dtypes: FLOAT_DTYPES, run: runScale },
} satisfies WasmKernelTable;
