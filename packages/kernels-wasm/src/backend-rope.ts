import { FLOAT_DTYPES, type RopeArgs, type KernelSpec, bytesPerElement, ropeBackwardSpec, ropeForwardSpec, ropeInvFreq, ropeRowStride } from "@kiln/contract";
import { callScratch } from "./call-scratch.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of RopeArgs in csrc/rope.c, and the byte offset of its f64 pos_offset. */
const FIELD = { batch: 0, seqLen: 1, heads: 2, headDim: 3, rowStride: 4, dtype: 5, sign: 6, invFreq: 10, x: 11, out: 12, docStarts: 13 } as const;
const POS_OFFSET_BYTE = 32;

/** Rough cost in flops of one rotated pair and of one cos/sin pair, to decide how many threads to wake. */
const PAIR_COST = 6;
const ANGLE_COST = 40;

/**
 * x and out are strided: they may be the same memory (in place) or rows of one
 * buffer that interleave (q and k of a packed qkv), so only their bounds are checked.
 */
function runRope(ctx: WasmKernelContext, spec: KernelSpec<RopeArgs>, args: RopeArgs, sign: 1 | -1): void {
  spec.check(args);
  const dtype = storageDtypeCode(spec.name, args.dtype);
  const { rt, memory } = ctx;
  const rowStride = ropeRowStride(args);
  const rows = args.batch * args.seqLen;
  const bytes = ((rows - 1) * rowStride + args.heads * args.headDim) * bytesPerElement(args.dtype);
  const x = memory.address(args.x, bytes, `${spec.name}.x`);
  const out = memory.address(args.out, bytes, `${spec.name}.out`);
  const docStarts = args.docStarts ? memory.address(args.docStarts, rows * 4, `${spec.name}.docStarts`) : 0;
  // theta^(-2i/headDim) and any rope scaling in f64, as the contract computes them.
  const half = args.headDim / 2;
  const invFreq = callScratch(rt, half * 8);
  new Float64Array(rt.memory.buffer, invFreq, half).set(ropeInvFreq(args));
  const { u32 } = rt.argsViews();
  u32[FIELD.batch] = args.batch;
  u32[FIELD.seqLen] = args.seqLen;
  u32[FIELD.heads] = args.heads;
  u32[FIELD.headDim] = args.headDim;
  u32[FIELD.rowStride] = rowStride;
  u32[FIELD.dtype] = dtype;
  u32[FIELD.sign] = sign;
  new DataView(rt.memory.buffer).setFloat64(rt.argsPtr + POS_OFFSET_BYTE, args.posOffset ?? 0, true);
  u32[FIELD.invFreq] = invFreq;
  u32[FIELD.x] = x;
  u32[FIELD.out] = out;
  u32[FIELD.docStarts] = docStarts;
  rt.run("kiln_rope", threadsForWork(rt, rows, half * (ANGLE_COST + PAIR_COST * args.heads)));
}

/** Rotary position embedding, rotate-half pairing (csrc/rope.c), forward and backward, in f32, bf16 and f16. */
export const ROPE_KERNELS = {
  ropeForward: { dtypes: FLOAT_DTYPES, run: (ctx, args) => runRope(ctx, ropeForwardSpec, args, 1) },
  ropeBackward: { dtypes: FLOAT_DTYPES, run: (ctx, args) => runRope(ctx, ropeBackwardSpec, args, -1) },
} satisfies WasmKernelTable;
