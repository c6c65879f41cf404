import { FLOAT_DTYPES, type ReduceArgs, type SumRowsArgs, sumRowsSpec, sumSpec, sumSquaresSpec } from "@kiln/contract";
import type { KernelName } from "./kernel-names.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of ReduceArgs and SumRowsArgs in csrc/reduce.c. */
const REDUCE_FIELD = { x: 0, partials: 1, n: 2, dtype: 3 } as const;
const SUM_ROWS_FIELD = { x: 0, out: 1, rows: 2, cols: 3, dtype: 4, accumulate: 5, gradDtype: 6 } as const;
/** Elements per unit of work: threads split at multiples of this (CHUNK_ALIGN in C). */
const CHUNK = 32;
/** Columns per unit of work for sumRows (the split alignment in C). */
const COLUMN_CHUNK = 16;
/** Rough cost of one element in flops, to decide how many threads to wake. */
const ELEMENT_COST = 8;

/**
 * sum or sumSquares: every thread writes the f64 sum of its chunk to a scratch
 * slot; the slots are added here in thread order (to 0, or to the previous
 * output when accumulating), so the result depends only on the data and the
 * number of threads.
 */
function runReduce(ctx: WasmKernelContext, spec: typeof sumSpec, entry: KernelName, args: ReduceArgs): void {
  spec.check(args);
  const dtype = storageDtypeCode(spec.name, args.dtype);
  const at = operandAddresses(spec, ctx.memory, args);
  const { rt } = ctx;
  const threads = threadsForWork(rt, Math.ceil(args.n / CHUNK), CHUNK * ELEMENT_COST);
  const partials = rt.heap.alloc(8 * threads);
  try {
    const { u32 } = rt.argsViews();
    u32[REDUCE_FIELD.x] = at.x.ptr;
    u32[REDUCE_FIELD.partials] = partials;
    u32[REDUCE_FIELD.n] = args.n;
    u32[REDUCE_FIELD.dtype] = dtype;
    rt.run(entry, threads);
    // out may sit at any byte offset: a DataView reads and writes it unaligned.
    const out = new DataView(rt.memory.buffer, at.out.ptr, 4);
    const sums = new Float64Array(rt.memory.buffer, partials, threads);
    let total = args.accumulate ? out.getFloat32(0, true) : 0;
    for (let t = 0; t < threads; t++) total += sums[t];
    out.setFloat32(0, total, true);
  } finally {
    rt.heap.release(partials);
  }
}

export function runSumRows(ctx: WasmKernelContext, args: SumRowsArgs): void {
  sumRowsSpec.check(args);
  const dtype = storageDtypeCode("sumRows", args.dtype);
  const at = operandAddresses(sumRowsSpec, ctx.memory, args);
  const { u32 } = ctx.rt.argsViews();
  u32[SUM_ROWS_FIELD.x] = at.x.ptr;
  u32[SUM_ROWS_FIELD.out] = at.out.ptr;
  u32[SUM_ROWS_FIELD.rows] = args.rows;
  u32[SUM_ROWS_FIELD.cols] = args.cols;
  u32[SUM_ROWS_FIELD.dtype] = dtype;
  u32[SUM_ROWS_FIELD.accumulate] = args.accumulate ? 1 : 0;
  u32[SUM_ROWS_FIELD.gradDtype] = gradDtypeCode("sumRows", args.dtype, args.gradDtype);
  ctx.rt.run("kiln_sum_rows", threadsForWork(ctx.rt, Math.ceil(args.cols / COLUMN_CHUNK), COLUMN_CHUNK * args.rows * ELEMENT_COST));
}

/** sum, sumSquares and sumRows (csrc/reduce.c) over f32, bf16 and f16 data. */
export const REDUCE_KERNELS = {
  sum: { dtypes: FLOAT_DTYPES, run: (ctx, args) => runReduce(ctx, sumSpec, "kiln_sum", args) },
  sumSquares: { dtypes: FLOAT_DTYPES, run: (ctx, args) => runReduce(ctx, sumSquaresSpec, "kiln_sum_squares", args) },
  sumRows: { dtypes: FLOAT_DTYPES, run: runSumRows },
} satisfies WasmKernelTable;
