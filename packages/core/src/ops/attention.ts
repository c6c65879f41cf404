import type { Graph } from "../graph/graph.js";
import { type BoundOperand, addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs } from "./grad-rule.js";

export interface AttentionShape {
  batch: number;
  seqLen: number;
  heads: number;
  kvHeads: number;
  /** Query and key head size. */
  headDim: number;
  /** Value (and output) head size, when it differs from headDim (multi-head latent attention). */
  vHeadDim?: number;
  /** Keys each query sees, its own included (sliding-window attention); absent: all before it. */
  window?: number;
  /** Score scale; absent: 1/sqrt(headDim). */
  scale?: number;
}

/**
 * Causal (or sliding-window) attention, inside each document of a packed row (g.documentStarts). q, k, v are separate (batch*seqLen, heads*headDim) tensors, or
 * slices of one packed qkv tensor (GPT-2's c_attn output) given with element
 * offsets and `rowStride`. Returns out (batch*seqLen, heads*vHeadDim), vHeadDim defaulting to headDim.
 */
export function attention(
  g: Graph,
  q: BoundOperand,
  k: BoundOperand,
  v: BoundOperand,
  shape: AttentionShape,
  strides: { qRowStride?: number; kvRowStride?: number; vRowStride?: number },
  name: string,
): number {
  const dtype = g.info(q.id).dtype;
  const rows = shape.batch * shape.seqLen;
  const out = g.tensor([rows, shape.heads * (shape.vHeadDim ?? shape.headDim)], dtype, "activation", name);
  const lse = g.tensor([shape.batch * shape.heads * shape.seqLen], "f32", "activation", `${name}.lse`);
  const docStarts = g.documentStarts;
  addKernelNode(g, "attentionForward", { q, k, v, out, lse, ...(docStarts === undefined ? {} : { docStarts }) }, { ...shape, ...strides, dtype }, { grad: "attention" });
  return out;
}

export const attentionGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  const a = kernelAttrs(node);
  const { q, k, v, out, lse, docStarts } = a.operands;
  const g = b.graph;
  const packed = q.id === k.id && k.id === v.id;
  let dQ: BoundOperand, dK: BoundOperand, dV: BoundOperand;
  if (packed) {
    const dQKV = b.activation(g.info(q.id).shape, q.id, `d(${g.info(q.id).name})`);
    dQ = { id: dQKV, offset: q.offset };
    dK = { id: dQKV, offset: k.offset };
    dV = { id: dQKV, offset: v.offset };
  } else {
    dQ = { id: b.activation(g.info(q.id).shape, q.id, `d(${g.info(q.id).name})`) };
    dK = { id: b.activation(g.info(k.id).shape, k.id, `d(${g.info(k.id).name})`) };
    dV = { id: b.activation(g.info(v.id).shape, v.id, `d(${g.info(v.id).name})`) };
  }
  addKernelNode(g, "attentionBackward", { dOut, q, k, v, out, lse, dQ, dK, dV, ...(docStarts ? { docStarts } : {}) }, { ...a.args });
  if (packed) b.addGrad(q.id, dQ.id);
  else {
    b.addGrad(q.id, dQ.id);
    b.addGrad(k.id, dK.id);
    b.addGrad(v.id, dV.id);
  }
};
