import { type CopyStridedArgs, FLOAT_DTYPES, copyStridedSpec } from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of CopyArgs in csrc/copy.c. */
const FIELD = {
  src: 0,
  dst: 1,
  batch: 2,
  rows: 3,
  cols: 4,
  srcBatchStride: 5,
  srcRowStride: 6,
  dstBatchStride: 7,
  dstRowStride: 8,
  accumulate: 9,
  dtype: 10,
} as const;
/** Rough cost of one element in flops (as cast and add count theirs), to decide how many threads to wake. */
const COPY_COST = 8;
const ADD_COST = 16;

function runCopyStrided(ctx: WasmKernelContext, args: CopyStridedArgs): void {
  copyStridedSpec.check(args);
  const dtype = storageDtypeCode("copyStrided", args.dtype);
  const at = operandAddresses(copyStridedSpec, ctx.memory, args);
  const { batch, rows, cols } = args;
  // A stride along a dimension of 1 is never used: 0 keeps it inside the i32 field.
  const batchStride = (s: number) => (batch === 1 ? 0 : s);
  const rowStride = (s: number) => (rows === 1 ? 0 : s);
  const { u32 } = ctx.rt.argsViews();
  u32[FIELD.src] = at.src.ptr;
  u32[FIELD.dst] = at.dst.ptr;
  u32[FIELD.batch] = batch;
  u32[FIELD.rows] = rows;
  u32[FIELD.cols] = cols;
  u32[FIELD.srcBatchStride] = batchStride(args.srcBatchStride);
  u32[FIELD.srcRowStride] = rowStride(args.srcRowStride);
  u32[FIELD.dstBatchStride] = batchStride(args.dstBatchStride);
  u32[FIELD.dstRowStride] = rowStride(args.dstRowStride);
  u32[FIELD.accumulate] = args.accumulate ? 1 : 0;
  u32[FIELD.dtype] = dtype;
  ctx.rt.run("kiln_copy_strided", threadsForWork(ctx.rt, batch * rows, (args.accumulate ? ADD_COST : COPY_COST) * cols));
}

/** copyStrided (csrc/copy.c) in f32, bf16 and f16. */
export const COPY_KERNELS = {
  copyStrided: { dtypes: FLOAT_DTYPES, run: runCopyStrided },
} satisfies WasmKernelTable;
