import {
  type CrossEntropyBackwardArgs,
  type CrossEntropyForwardArgs,
  FLOAT_DTYPES,
  KernelArgumentError,
  type SoftmaxForwardArgs,
  crossEntropyBackwardSpec,
  crossEntropyForwardSpec,
  softmaxForwardSpec,
} from "@kiln/contract";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { nativeRouting } from "./native-routing.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of CrossEntropyArgs in csrc/cross_entropy.c. */
const FIELD = { logits: 0, targets: 1, losses: 2, lse: 3, dLogits: 4, rows: 5, vocab: 6, dtype: 7, scale: 8 } as const;
/** Rough cost of one logit in flops per kernel (exponentials dominate), to decide how many threads to wake. */
const FORWARD_COST = 24;
const BACKWARD_COST = 20;
const SOFTMAX_COST = 40;

/** The cross-entropy calls that run natively: they read csrc/cross_entropy.c's block as it is (softmax stays WebAssembly). */
export const nativeCrossEntropy = nativeRouting("crossEntropy", {
  kiln_cross_entropy_forward: "kiln_native_cross_entropy_forward",
  kiln_cross_entropy_forward_backward: "kiln_native_cross_entropy_forward_backward",
  kiln_cross_entropy_backward: "kiln_native_cross_entropy_backward",
});

/** Throws like the reference when a target is >= vocab (negative targets are ignored rows). */
function checkTargets(ctx: WasmKernelContext, kernel: string, ptr: number, rows: number, vocab: number): void {
  const targets = new DataView(ctx.rt.memory.buffer, ptr, 4 * rows);
  for (let r = 0; r < rows; r++) {
    const t = targets.getInt32(4 * r, true);
    if (t >= vocab) {
      throw new KernelArgumentError(`id ${t} at position ${r} is outside [0, ${vocab})`, {
        where: kernel,
        hint: "token ids must be smaller than the vocabulary size",
      });
    }
  }
}

function writeArgs(ctx: WasmKernelContext, fields: Partial<Record<keyof typeof FIELD, number>>, scale: number): void {
  const { u32, f32 } = ctx.rt.argsViews();
  for (const key of Object.keys(FIELD) as (keyof typeof FIELD)[]) if (key !== "scale") u32[FIELD[key]] = fields[key] ?? 0;
  f32[FIELD.scale] = scale;
}

function runForward(ctx: WasmKernelContext, args: CrossEntropyForwardArgs): void {
  crossEntropyForwardSpec.check(args);
  const dtype = storageDtypeCode("crossEntropyForward", args.dtype);
  const at = operandAddresses(crossEntropyForwardSpec, ctx.memory, args);
  checkTargets(ctx, "crossEntropyForward", at.targets.ptr, args.rows, args.vocab);
  const { rows, vocab } = args;
  const dLogits = at.dLogits?.ptr;
  writeArgs(ctx, { logits: at.logits.ptr, targets: at.targets.ptr, losses: at.losses.ptr, lse: at.lse.ptr, dLogits, rows, vocab, dtype }, args.lossScale ?? 1);
  if (dLogits === undefined) ctx.rt.run(nativeCrossEntropy.entry(ctx.rt, "kiln_cross_entropy_forward"), threadsForWork(ctx.rt, rows, vocab * FORWARD_COST));
  else ctx.rt.run(nativeCrossEntropy.entry(ctx.rt, "kiln_cross_entropy_forward_backward"), threadsForWork(ctx.rt, rows, vocab * (FORWARD_COST + BACKWARD_COST)));
}

function runBackward(ctx: WasmKernelContext, args: CrossEntropyBackwardArgs): void {
  crossEntropyBackwardSpec.check(args);
  const dtype = storageDtypeCode("crossEntropyBackward", args.dtype);
  const at = operandAddresses(crossEntropyBackwardSpec, ctx.memory, args);
  checkTargets(ctx, "crossEntropyBackward", at.targets.ptr, args.rows, args.vocab);
  const { rows, vocab } = args;
  writeArgs(ctx, { logits: at.logits.ptr, targets: at.targets.ptr, lse: at.lse.ptr, dLogits: at.dLogits.ptr, rows, vocab, dtype }, args.lossScale);
  ctx.rt.run(nativeCrossEntropy.entry(ctx.rt, "kiln_cross_entropy_backward"), threadsForWork(ctx.rt, rows, vocab * BACKWARD_COST));
}

function runSoftmax(ctx: WasmKernelContext, args: SoftmaxForwardArgs): void {
  softmaxForwardSpec.check(args);
  const dtype = storageDtypeCode("softmaxForward", args.dtype);
  const at = operandAddresses(softmaxForwardSpec, ctx.memory, args);
  const { rows, dim } = args;
  writeArgs(ctx, { logits: at.x.ptr, dLogits: at.out.ptr, rows, vocab: dim, dtype }, 1 / (args.temperature ?? 1));
  ctx.rt.run("kiln_softmax_forward", threadsForWork(ctx.rt, rows, dim * SOFTMAX_COST));
}

/** Fused softmax + cross-entropy forward and backward (the forward optionally writing the backward's dLogits too), and row softmax (csrc/cross_entropy.c). */
export const CROSS_ENTROPY_KERNELS = {
  crossEntropyForward: { dtypes: FLOAT_DTYPES, run: runForward },
  crossEntropyBackward: { dtypes: FLOAT_DTYPES, run: runBackward },
  softmaxForward: { dtypes: FLOAT_DTYPES, run: runSoftmax },
} satisfies WasmKernelTable;
