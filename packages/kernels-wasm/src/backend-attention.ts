import {
  type AttentionBackwardArgs,
  type AttentionDims,
  type AttentionForwardArgs,
  type KernelSpec,
  KernelArgumentError,
  type Operand,
  attentionBackwardSpec,
  attentionForwardSpec,
  attentionLayout,
  bytesPerElement,
} from "@kiln/contract";
import type { BackendMemory } from "./backend-memory.js";
import type { AttentionCall } from "./attention-call.js";
import { dispatchAttentionBackward, dispatchAttentionForward } from "./attention-dispatch.js";
import type { WasmKernelTable } from "./kernel-table.js";

/** Bytes an operand spans in linear memory, with its row period (stride) and the bytes used per row. */
interface Region {
  key: string;
  start: number;
  end: number;
  stride: number;
  width: number;
}

/** Whether two regions can share a byte: overlapping spans, unless they are interleaved rows of one period. */
function mayOverlap(a: Region, b: Region): boolean {
  if (a.end <= b.start || b.end <= a.start) return false;
  if (a.stride !== b.stride || a.width + b.width > a.stride) return true;
  const offset = (((b.start - a.start) % a.stride) + a.stride) % a.stride;
  return !(offset >= a.width && offset + b.width <= a.stride);
}

/**
 * Byte addresses of every operand (bounds-checked against its buffer), after
 * checking that no output shares memory with another operand.
 */
function placeOperands<A extends AttentionDims>(spec: KernelSpec<A>, memory: BackendMemory, args: A): Record<string, number> {
  const l = attentionLayout(args);
  const qRows = { stride: l.qRowStride, width: args.heads * args.headDim };
  const kRows = { stride: l.kvRowStride, width: args.kvHeads * args.headDim };
  const vRows = { stride: l.vRowStride, width: args.kvHeads * l.vHeadDim };
  const outRows = { stride: l.outRowStride, width: args.heads * l.vHeadDim };
  const rows: Record<string, { stride: number; width: number }> = {
    q: qRows, dQ: qRows, k: kRows, dK: kRows, v: vRows, dV: vRows, out: outRows, dOut: outRows,
  };
  const regions: (Region & { output: boolean })[] = [];
  for (const s of spec.operands(args)) {
    const op = (args as unknown as Record<string, Operand | undefined>)[s.key];
    if (op === undefined) {
      if (s.optional) continue;
      throw new KernelArgumentError(`${spec.name}.${s.key} is missing`, { where: spec.name, hint: `pass a buffer for ${s.key}` });
    }
    const esize = bytesPerElement(s.dtype);
    const start = memory.address(op, s.elements * esize, `${spec.name}.${s.key}`);
    const r = rows[s.key] ?? { stride: s.elements, width: s.elements };
    const stride = r.stride * esize;
    const width = r.width * esize;
    regions.push({ key: s.key, start, end: start + s.elements * esize, stride, width, output: s.role !== "in" });
  }
  for (const out of regions.filter((r) => r.output)) {
    for (const other of regions) {
      if (other === out) continue;
      if (mayOverlap(out, other)) {
        throw new KernelArgumentError(`${spec.name}.${out.key} overlaps ${spec.name}.${other.key}`, {
          where: spec.name,
          hint: "give every output its own memory (interleaved slices of one packed buffer are fine)",
        });
      }
    }
  }
  return Object.fromEntries(regions.map((r) => [r.key, r.start]));
}

function callOf(args: AttentionDims, at: Record<string, number>): AttentionCall {
  const l = attentionLayout(args);
  return {
    batch: args.batch,
    seqLen: args.seqLen,
    heads: args.heads,
    kvHeads: args.kvHeads,
    headDim: args.headDim,
    vHeadDim: l.vHeadDim,
    qRowStride: l.qRowStride,
    kvRowStride: l.kvRowStride,
    vRowStride: l.vRowStride,
    outRowStride: l.outRowStride,
    scale: l.scale,
    window: l.window,
    dtype: args.dtype,
    q: at.q,
    k: at.k,
    v: at.v,
    out: at.out,
    lse: at.lse,
    dOut: at.dOut ?? 0,
    dQ: at.dQ ?? 0,
    dK: at.dK ?? 0,
    dV: at.dV ?? 0,
    docStarts: at.docStarts ?? 0,
  };
}

const DTYPES = ["f32", "bf16", "f16"] as const;

/** Causal, sliding-window and document-masked (docStarts) attention forward and backward (f32, bf16, f16 storage; f32 compute). */
export const ATTENTION_KERNELS: WasmKernelTable = {
  attentionForward: {
    dtypes: DTYPES,
    run(ctx, args: AttentionForwardArgs) {
      attentionForwardSpec.check(args);
      dispatchAttentionForward(ctx.rt, callOf(args, placeOperands(attentionForwardSpec, ctx.memory, args)));
    },
  },
  attentionBackward: {
    dtypes: DTYPES,
    run(ctx, args: AttentionBackwardArgs) {
      attentionBackwardSpec.check(args);
      dispatchAttentionBackward(ctx.rt, callOf(args, placeOperands(attentionBackwardSpec, ctx.memory, args)));
    },
  },
};
