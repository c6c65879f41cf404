import {
  FLOAT_DTYPES,
  type KernelSpec,
  type MoeCombineArgs,
  type MoeCombineScaleGradArgs,
  type MoeDispatchArgs,
  moeCombineScaleGradSpec,
  moeCombineSpec,
  moeDispatchSpec,
} from "@kiln/contract";
import { checkIndices } from "./check-indices.js";
import type { KernelName } from "./kernel-names.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import type { OperandRange } from "./operand-addresses.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of MoveArgs in csrc/moe_move.c. */
const FIELD = { tokens: 0, topK: 1, dim: 2, dtype: 3, x: 4, slots: 5, scale: 6, out: 7, dOut: 8, accumulate: 9 } as const;

type MoveArgs = MoeDispatchArgs | MoeCombineArgs | MoeCombineScaleGradArgs;

/**
 * Checks the call and its slots (each names a row of the T*k slot-order rows),
 * writes MoveArgs and runs `entry`; `units` rows of `dim` are moved or dotted.
 */
function runMove<A extends MoveArgs>(ctx: WasmKernelContext, spec: KernelSpec<A>, args: A, entry: KernelName, fill: (at: Record<string, OperandRange>) => Partial<Record<keyof typeof FIELD, number>>, units: number): void {
  spec.check(args);
  const dtype = storageDtypeCode(spec.name, args.dtype);
  const at = operandAddresses(spec, ctx.memory, args);
  const { rt } = ctx;
  const assignments = args.tokens * args.topK;
  checkIndices(rt, spec.name, at.slots.ptr, assignments, assignments, "slots must be the slots moeRoute wrote (a permutation of 0..tokens*topK-1)");
  const { u32 } = rt.argsViews();
  u32.fill(0, 0, FIELD.accumulate + 1);
  u32[FIELD.tokens] = args.tokens;
  u32[FIELD.topK] = args.topK;
  u32[FIELD.dim] = args.dim;
  u32[FIELD.dtype] = dtype;
  u32[FIELD.slots] = at.slots.ptr;
  for (const [key, value] of Object.entries(fill(at))) u32[FIELD[key as keyof typeof FIELD]] = value;
  rt.run(entry, threadsForWork(rt, units, 2 * args.dim));
}

const runMoeDispatch = (ctx: WasmKernelContext, args: MoeDispatchArgs) =>
  runMove(ctx, moeDispatchSpec, args, "kiln_moe_dispatch", (at) => ({ x: at.x.ptr, scale: at.scale?.ptr ?? 0, out: at.out.ptr }), args.tokens * args.topK);

const runMoeCombine = (ctx: WasmKernelContext, args: MoeCombineArgs) =>
  runMove(ctx, moeCombineSpec, args, "kiln_moe_combine", (at) => ({ x: at.x.ptr, scale: at.scale?.ptr ?? 0, out: at.out.ptr, accumulate: args.accumulate ? 1 : 0 }), args.tokens * args.topK);

const runMoeCombineScaleGrad = (ctx: WasmKernelContext, args: MoeCombineScaleGradArgs) =>
  runMove(ctx, moeCombineScaleGradSpec, args, "kiln_moe_combine_scale_grad", (at) => ({ x: at.x.ptr, out: at.dScale.ptr, dOut: at.dOut.ptr }), args.tokens * args.topK);

/** Mixture-of-experts token movement (csrc/moe_move.c), in f32, bf16 and f16; slots i32. */
export const MOE_MOVE_KERNELS = {
  moeDispatch: { dtypes: FLOAT_DTYPES, run: runMoeDispatch },
  moeCombine: { dtypes: FLOAT_DTYPES, run: runMoeCombine },
  moeCombineScaleGrad: { dtypes: FLOAT_DTYPES, run: runMoeCombineScaleGrad },
} satisfies WasmKernelTable;
