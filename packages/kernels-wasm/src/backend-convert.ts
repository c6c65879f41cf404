import {
  ALL_DTYPES,
  type CastArgs,
  type CheckFiniteArgs,
  FLOAT_DTYPES,
  type FillArgs,
  bytesPerElement,
  castSpec,
  checkFiniteSpec,
  encodeElements,
  fillSpec,
  KernelArgumentError,
} from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of CastArgs, FillArgs and CheckFiniteArgs in csrc/convert.c. */
const CAST_FIELD = { src: 0, dst: 1, n: 2, srcDtype: 3, dstDtype: 4 } as const;
const FILL_FIELD = { out: 0, n: 1, elemBytes: 2, bits: 3 } as const;
const CHECK_FIELD = { x: 0, flag: 1, n: 2, dtype: 3 } as const;
/** Elements per unit of work: threads split at multiples of this (CHUNK_ALIGN in C). */
const CHUNK = 32;
/** Rough cost of one element in flops, to decide how many threads to wake. */
const ELEMENT_COST = 8;

const workThreads = (ctx: WasmKernelContext, n: number) => threadsForWork(ctx.rt, Math.ceil(n / CHUNK), CHUNK * ELEMENT_COST);

function runCast(ctx: WasmKernelContext, args: CastArgs): void {
  castSpec.check(args);
  const srcDtype = storageDtypeCode("cast", args.srcDtype);
  const dstDtype = storageDtypeCode("cast", args.dstDtype);
  const at = operandAddresses(castSpec, ctx.memory, args);
  const { u32 } = ctx.rt.argsViews();
  u32[CAST_FIELD.src] = at.src.ptr;
  u32[CAST_FIELD.dst] = at.dst.ptr;
  u32[CAST_FIELD.n] = args.n;
  u32[CAST_FIELD.srcDtype] = srcDtype;
  u32[CAST_FIELD.dstDtype] = dstDtype;
  ctx.rt.run("kiln_cast", workThreads(ctx, args.n));
}

/** The element's bytes as the reference stores them (floats rounded once to nearest even, integers wrapped). */
function fillBits(args: FillArgs): number {
  const bytes = new Uint8Array(4);
  encodeElements([args.value], args.dtype, bytes);
  return new DataView(bytes.buffer).getUint32(0, true);
}

function runFill(ctx: WasmKernelContext, args: FillArgs): void {
  fillSpec.check(args);
  if (!ALL_DTYPES.includes(args.dtype)) {
    throw new KernelArgumentError(`dtype ${String(args.dtype)} is not a storage dtype`, { where: "fill", hint: `use one of ${ALL_DTYPES.join(", ")}` });
  }
  const at = operandAddresses(fillSpec, ctx.memory, args);
  const { u32 } = ctx.rt.argsViews();
  u32[FILL_FIELD.out] = at.out.ptr;
  u32[FILL_FIELD.n] = args.n;
  u32[FILL_FIELD.elemBytes] = bytesPerElement(args.dtype);
  u32[FILL_FIELD.bits] = fillBits(args);
  ctx.rt.run("kiln_fill", workThreads(ctx, args.n));
}

function runCheckFinite(ctx: WasmKernelContext, args: CheckFiniteArgs): void {
  checkFiniteSpec.check(args);
  const dtype = storageDtypeCode("checkFinite", args.dtype);
  const at = operandAddresses(checkFiniteSpec, ctx.memory, args);
  const { u32 } = ctx.rt.argsViews();
  u32[CHECK_FIELD.x] = at.x.ptr;
  u32[CHECK_FIELD.flag] = at.flag.ptr;
  u32[CHECK_FIELD.n] = args.n;
  u32[CHECK_FIELD.dtype] = dtype;
  ctx.rt.run("kiln_check_finite", workThreads(ctx, args.n));
}

/** cast between f32, bf16 and f16, fill of every dtype, and checkFinite (csrc/convert.c). */
export const CONVERT_KERNELS = {
  cast: { dtypes: FLOAT_DTYPES, run: runCast },
  fill: { dtypes: ALL_DTYPES, run: runFill },
  checkFinite: { dtypes: FLOAT_DTYPES, run: runCheckFinite },
} satisfies WasmKernelTable;
