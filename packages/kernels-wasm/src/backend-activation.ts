import {
  FLOAT_DTYPES,
  type KernelSpec,
  type SwiGluBackwardArgs,
  type SwiGluForwardArgs,
  type UnaryBackwardArgs,
  type UnaryForwardArgs,
  geluBackwardSpec,
  geluForwardSpec,
  siluBackwardSpec,
  siluForwardSpec,
  swiGluBackwardSpec,
  swiGluForwardSpec,
} from "@kiln/contract";
import type { KernelName } from "./kernel-names.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { runSumRows } from "./backend-reduce.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";
import { nativeActivations } from "./activation-dispatch.js";

/** Word index of each field of ActivationArgs in csrc/activation.c. */
const FIELD = { n: 0, dtype: 1, in0: 2, in1: 3, in2: 4, out0: 5, out1: 6 } as const;
/** Elements per unit of work: threads split at multiples of this (as in csrc/activation.c). */
const CHUNK = 16;
/** Rough cost of one element in flops (exp, divide, polynomial), to decide how many threads to wake. */
const COST = 40;

/** Operand keys in ActivationArgs order: in0, in1, in2 read; out0, out1 written. */
interface Slots {
  in0: string;
  in1?: string;
  in2?: string;
  out0: string;
  out1?: string;
}

/** One element-wise activation kernel: check, resolve the operands into their slots, run. */
function activation<A extends { n: number; dtype: string }>(spec: KernelSpec<A>, entryOf: KernelName | ((args: A) => KernelName), slots: Slots) {
  return (ctx: WasmKernelContext, args: A): void => {
    const entry = typeof entryOf === "function" ? entryOf(args) : entryOf;
    spec.check(args);
    const dtype = storageDtypeCode(spec.name, args.dtype as never);
    const at = operandAddresses(spec, ctx.memory, args);
    const ptr = (key: string | undefined) => (key === undefined ? 0 : at[key].ptr);
    const { u32 } = ctx.rt.argsViews();
    u32[FIELD.n] = args.n;
    u32[FIELD.dtype] = dtype;
    u32[FIELD.in0] = ptr(slots.in0);
    u32[FIELD.in1] = ptr(slots.in1);
    u32[FIELD.in2] = ptr(slots.in2);
    u32[FIELD.out0] = ptr(slots.out0);
    u32[FIELD.out1] = ptr(slots.out1);
    ctx.rt.run(nativeActivations.entry(ctx.rt, entry), threadsForWork(ctx.rt, Math.ceil(args.n / CHUNK), CHUNK * COST));
  };
}

const FORWARD: Slots = { in0: "x", out0: "out" };
const BACKWARD: Slots = { in0: "x", in1: "dOut", out0: "dX" };

/**
 * A unary backward; with dXColSums, dX's column sums are then added by the sumRows
 * kernel in a second pass over the rows just written (on the CPU the last of them are
 * still in cache; the CUDA backend sums them in the same pass).
 */
function unaryBackward(spec: KernelSpec<UnaryBackwardArgs>, entry: KernelName) {
  const elementwise = activation<UnaryBackwardArgs>(spec, entry, BACKWARD);
  return (ctx: WasmKernelContext, args: UnaryBackwardArgs): void => {
    elementwise(ctx, args);
    if (!args.dXColSums) return;
    const cols = args.cols!;
    runSumRows(ctx, { x: args.dX, out: args.dXColSums, rows: args.n / cols, cols, accumulate: true, dtype: args.dtype, gradDtype: args.gradDtype });
  };
}

/** The gated unit's entry: SwiGLU, or GeGLU for activation "gelu". */
const gated = (swiglu: KernelName, geglu: KernelName) => (args: { activation?: string }) => (args.activation === "gelu" ? geglu : swiglu);

/** GELU (tanh approximation), SiLU, SwiGLU and GeGLU (csrc/activation.c), forward and backward, in f32, bf16 and f16. */
export const ACTIVATION_KERNELS = {
  geluForward: { dtypes: FLOAT_DTYPES, run: activation<UnaryForwardArgs>(geluForwardSpec, "kiln_gelu_forward", FORWARD) },
  geluBackward: { dtypes: FLOAT_DTYPES, run: unaryBackward(geluBackwardSpec, "kiln_gelu_backward") },
  siluForward: { dtypes: FLOAT_DTYPES, run: activation<UnaryForwardArgs>(siluForwardSpec, "kiln_silu_forward", FORWARD) },
  siluBackward: { dtypes: FLOAT_DTYPES, run: unaryBackward(siluBackwardSpec, "kiln_silu_backward") },
  swiGluForward: {
    dtypes: FLOAT_DTYPES,
    run: activation<SwiGluForwardArgs>(swiGluForwardSpec, gated("kiln_swiglu_forward", "kiln_geglu_forward"), { in0: "gate", in1: "up", out0: "out" }),
  },
  swiGluBackward: {
    dtypes: FLOAT_DTYPES,
    run: activation<SwiGluBackwardArgs>(swiGluBackwardSpec, gated("kiln_swiglu_backward", "kiln_geglu_backward"), { in0: "gate", in1: "up", in2: "dOut", out0: "dGate", out1: "dUp" }),
  },
} satisfies WasmKernelTable;
