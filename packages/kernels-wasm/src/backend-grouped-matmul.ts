import {
  FLOAT_DTYPES,
  type GroupedMatmulArgs,
  type GroupedMatmulWeightGradArgs,
  KernelArgumentError,
  groupedMatmulSpec,
  groupedMatmulWeightGradSpec,
  wideDtype,
} from "@kiln/contract";
import type { KernelRuntime } from "./kernel-runtime.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { threadsFor } from "./matmul-call.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";

/** Word index of each field of GroupedArgs in csrc/grouped_matmul.c. */
const FIELD = { rows: 0, n: 1, k: 2, groups: 3, dtype: 4, a: 5, b: 6, c: 7, offsets: 8, transB: 9, accumulate: 10, scratch: 11, scratchStride: 12, cF32: 13 } as const;

/**
 * The kernel reads the group boundaries itself; they are checked here first (the
 * memory is the kernel's, so this costs groups + 1 reads): a bad boundary would
 * make the kernel read and write outside its operands.
 */
function checkOffsets(rt: KernelRuntime, kernel: string, ptr: number, groups: number, rows: number): void {
  const view = new DataView(rt.memory.buffer, ptr, (groups + 1) * 4);
  const o = Array.from({ length: groups + 1 }, (_, i) => view.getInt32(i * 4, true));
  const bad = o[0] !== 0 || o[groups] !== rows || o.some((x, i) => i > 0 && x < o[i - 1]);
  if (bad) {
    throw new KernelArgumentError(`offsets [${o.join(", ")}] do not split ${rows} rows into ${groups} groups`, {
      where: kernel,
      hint: "offsets must start at 0, never decrease and end at rows",
    });
  }
}

interface GroupedCall {
  rows: number;
  n: number;
  k: number;
  groups: number;
  dtype: number;
  a: number;
  b: number;
  c: number;
  offsets: number;
  transB: boolean;
  accumulate: boolean;
  /** C (dB for the weight grad) in f32 while A and B are 16-bit. */
  cF32: boolean;
}

function runGrouped(rt: KernelRuntime, entry: "kiln_grouped_matmul" | "kiln_grouped_matmul_weight_grad", call: GroupedCall): void {
  const { u32 } = rt.argsViews();
  u32[FIELD.rows] = call.rows;
  u32[FIELD.n] = call.n;
  u32[FIELD.k] = call.k;
  u32[FIELD.groups] = call.groups;
  u32[FIELD.dtype] = call.dtype;
  u32[FIELD.a] = call.a;
  u32[FIELD.b] = call.b;
  u32[FIELD.c] = call.c;
  u32[FIELD.offsets] = call.offsets;
  u32[FIELD.transB] = call.transB ? 1 : 0;
  u32[FIELD.accumulate] = call.accumulate ? 1 : 0;
  u32[FIELD.scratch] = rt.matmulScratch;
  u32[FIELD.scratchStride] = rt.matmulScratchStride;
  u32[FIELD.cF32] = call.cF32 ? 1 : 0;
  const flops = 2 * call.rows * call.n * call.k;
  rt.run(entry, threadsFor(flops, rt.info.threads, rt.info.minFlopsPerThread));
}

function runGroupedMatmul(ctx: WasmKernelContext, args: GroupedMatmulArgs): void {
  groupedMatmulSpec.check(args);
  const dtype = storageDtypeCode("groupedMatmul", args.dtype);
  const at = operandAddresses(groupedMatmulSpec, ctx.memory, args);
  checkOffsets(ctx.rt, "groupedMatmul", at.offsets.ptr, args.groups, args.rows);
  runGrouped(ctx.rt, "kiln_grouped_matmul", {
    ...args,
    dtype,
    a: at.a.ptr,
    b: at.b.ptr,
    c: at.c.ptr,
    offsets: at.offsets.ptr,
    transB: args.transB ?? false,
    accumulate: args.accumulate ?? false,
    cF32: false,
  });
}

function runGroupedMatmulWeightGrad(ctx: WasmKernelContext, args: GroupedMatmulWeightGradArgs): void {
  groupedMatmulWeightGradSpec.check(args);
  const dtype = storageDtypeCode("groupedMatmulWeightGrad", args.dtype);
  const at = operandAddresses(groupedMatmulWeightGradSpec, ctx.memory, args);
  checkOffsets(ctx.rt, "groupedMatmulWeightGrad", at.offsets.ptr, args.groups, args.rows);
  runGrouped(ctx.rt, "kiln_grouped_matmul_weight_grad", {
    ...args,
    dtype,
    a: at.a.ptr,
    b: at.dC.ptr,
    c: at.dB.ptr,
    offsets: at.offsets.ptr,
    transB: false,
    accumulate: true,
    cF32: wideDtype(args.dtype, args.gradDtype) === "f32",
  });
}

/** One matmul per group of rows and its per-group weight gradient (csrc/grouped_matmul.c), in f32, bf16 and f16. */
export const GROUPED_MATMUL_KERNELS = {
  groupedMatmul: { dtypes: FLOAT_DTYPES, run: runGroupedMatmul },
  groupedMatmulWeightGrad: { dtypes: FLOAT_DTYPES, run: runGroupedMatmulWeightGrad },
} satisfies WasmKernelTable;
