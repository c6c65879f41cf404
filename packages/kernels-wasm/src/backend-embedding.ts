import { type EmbeddingBackwardArgs, type EmbeddingForwardArgs, FLOAT_DTYPES, KernelArgumentError, embeddingBackwardSpec, embeddingForwardSpec } from "@kiln/contract";
import { callScratch } from "./call-scratch.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { gradDtypeCode, storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of EmbeddingArgs in csrc/embedding.c (nUsed is written by the kernel). */
const FIELD = { count: 0, vocab: 1, dim: 2, dtype: 3, ids: 4, table: 5, out: 6, first: 7, next: 8, used: 9, before: 10, nUsed: 11, gradDtype: 12 } as const;

/** Every id must index a table row; checked before anything is written. */
function checkIds(rt: KernelRuntime, kernel: string, ids: number, count: number, vocab: number): void {
  const view = new DataView(rt.memory.buffer, ids, count * 4);
  for (let i = 0; i < count; i++) {
    const id = view.getInt32(i * 4, true);
    if (!(id >= 0 && id < vocab)) {
      throw new KernelArgumentError(`id ${id} at position ${i} is outside [0, ${vocab})`, {
        where: kernel,
        hint: "token ids must be smaller than the vocabulary size",
      });
    }
  }
}

function writeArgs(rt: KernelRuntime, args: { count: number; vocab: number; dim: number }, dtype: number, ids: number, table: number, out: number): Uint32Array {
  const { u32 } = rt.argsViews();
  u32[FIELD.count] = args.count;
  u32[FIELD.vocab] = args.vocab;
  u32[FIELD.dim] = args.dim;
  u32[FIELD.dtype] = dtype;
  u32[FIELD.ids] = ids;
  u32[FIELD.table] = table;
  u32[FIELD.out] = out;
  return u32;
}

function runEmbeddingForward(ctx: WasmKernelContext, args: EmbeddingForwardArgs): void {
  embeddingForwardSpec.check(args);
  const dtype = storageDtypeCode("embeddingForward", args.dtype);
  const at = operandAddresses(embeddingForwardSpec, ctx.memory, args);
  checkIds(ctx.rt, "embeddingForward", at.ids.ptr, args.count, args.vocab);
  writeArgs(ctx.rt, args, dtype, at.ids.ptr, at.table.ptr, at.out.ptr);
  ctx.rt.run("kiln_embedding_forward", threadsForWork(ctx.rt, args.count, args.dim));
}

/** Groups the positions of each id (one thread), then sums each id's rows into dTable (threads split the ids). */
function runEmbeddingBackward(ctx: WasmKernelContext, args: EmbeddingBackwardArgs): void {
  embeddingBackwardSpec.check(args);
  const dtype = storageDtypeCode("embeddingBackward", args.dtype);
  const at = operandAddresses(embeddingBackwardSpec, ctx.memory, args);
  const { rt } = ctx;
  checkIds(rt, "embeddingBackward", at.ids.ptr, args.count, args.vocab);
  const first = callScratch(rt, (args.vocab + 3 * args.count) * 4);
  const u32 = writeArgs(rt, args, dtype, at.ids.ptr, at.dOut.ptr, at.dTable.ptr);
  u32[FIELD.first] = first;
  u32[FIELD.next] = first + args.vocab * 4;
  u32[FIELD.used] = first + (args.vocab + args.count) * 4;
  u32[FIELD.before] = first + (args.vocab + 2 * args.count) * 4;
  u32[FIELD.gradDtype] = gradDtypeCode("embeddingBackward", args.dtype, args.gradDtype);
  rt.run("kiln_embedding_group", 1);
  rt.run("kiln_embedding_backward", threadsForWork(rt, args.count, 2 * args.dim));
}

/** Embedding lookup and its accumulating gradient (csrc/embedding.c), in f32, bf16 and f16; ids i32. */
export const EMBEDDING_KERNELS = {
  embeddingForward: { dtypes: FLOAT_DTYPES, run: runEmbeddingForward },
  embeddingBackward: { dtypes: FLOAT_DTYPES, run: runEmbeddingBackward },
} satisfies WasmKernelTable;
