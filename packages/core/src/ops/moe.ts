import type { FloatDType } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/** The routing of T tokens to their top k of E experts (contract kernel moeRoute). */
export interface MoeRouting {
  /** (T, k) routing weights, renormalised over the chosen experts; differentiable. */
  weights: number;
  /** (T, k) i32: the slot of each assignment in expert-sorted order. */
  slots: number;
  /** (E + 1) i32: where each expert's slots start. */
  offsets: number;
  /** f32 [1]: this layer's load-balancing loss (already times alpha). */
  auxLoss: number;
  tokens: number;
  topK: number;
}

/**
 * Routes each row of router logits (T, E) to its top k experts. The load-balancing
 * coefficient is the run-time scalar loadBalanceAlpha; the auxiliary loss's gradient
 * enters the backward pass here, weighted by the run-time auxScale.
 */
export function moeRoute(g: Graph, logits: number, topK: number, name: string): MoeRouting {
  const [tokens, numExperts] = g.info(logits).shape;
  const dtype = g.info(logits).dtype as FloatDType;
  const probs = g.tensor([tokens, numExperts], "f32", "activation", `${name}.probs`);
  const experts = g.tensor([tokens, topK], "i32", "activation", `${name}.experts`);
  const weights = g.tensor([tokens, topK], dtype, "activation", `${name}.weights`);
  // An output (kept whole after the step): the trainer reads each expert's load from it.
  const offsets = g.tensor([numExperts + 1], "i32", "output", `${name}.offsets`);
  const slots = g.tensor([tokens, topK], "i32", "activation", `${name}.slots`);
  const auxLoss = g.tensor([1], "f32", "activation", `${name}.aux_loss`);
  addKernelNode(
    g,
    "moeRoute",
    { logits, probs, experts, weights, offsets, slots, auxLoss },
    { tokens, numExperts, topK, alpha: 0, dtype },
    { grad: "moeRoute", runtimeArgs: { alpha: "loadBalanceAlpha" } },
  );
  return { weights, slots, offsets, auxLoss, tokens, topK };
}

export const moeRouteGrad: GradRule = (node, b, outGrads) => {
  const dWeights = outGrads[node.outputs.indexOf(operandOf(node, "weights"))];
  const logits = operandOf(node, "logits");
  if (!b.needsGrad(logits)) return;
  const args = kernelAttrs(node).args as { tokens: number; numExperts: number; topK: number; dtype: FloatDType };
  const weights = operandOf(node, "weights");
  // Without a gradient for the weights, the auxiliary loss alone still trains the router.
  const dW = dWeights ?? zeros(b.graph, [args.tokens, args.topK], args.dtype, `d(${b.graph.info(weights).name})`);
  const dLogits = b.activation([args.tokens, args.numExperts], logits, `d(${b.graph.info(logits).name})`);
  addKernelNode(
    b.graph,
    "moeRouteBackward",
    { dWeights: dW, weights, experts: operandOf(node, "experts"), probs: operandOf(node, "probs"), offsets: operandOf(node, "offsets"), dLogits },
    { ...args, alpha: 0, auxScale: 0 },
    { runtimeArgs: { alpha: "loadBalanceAlpha", auxScale: "auxScale" } },
  );
  b.addGrad(logits, dLogits);
};

function zeros(g: Graph, shape: number[], dtype: FloatDType, name: string): number {
  const t = g.tensor(shape, dtype, "activation", name);
  addKernelNode(g, "fill", { out: t }, { n: g.elements(t), value: 0, dtype });
  return t;
}

/** Rows of x (T, dim) copied to their k slots (T*k, dim), sorted by expert. */
export function moeDispatch(g: Graph, x: number, r: MoeRouting, name: string): number {
  const [tokens, dim] = g.info(x).shape;
  const out = g.tensor([tokens * r.topK, dim], g.info(x).dtype, "activation", name);
  addKernelNode(g, "moeDispatch", { x, slots: r.slots, out }, { tokens, topK: r.topK, dim, dtype: g.info(x).dtype }, { grad: "moeDispatch" });
  return out;
}

export const moeDispatchGrad: GradRule = (node, b, [dOut]) => {
  const x = operandOf(node, "x");
  if (dOut === undefined || !b.needsGrad(x)) return;
  const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
  // d(row t) = sum of the gradients of its k copies.
  addKernelNode(b.graph, "moeCombine", { x: dOut, slots: operandOf(node, "slots"), out: dX }, { ...kernelAttrs(node).args });
  b.addGrad(x, dX);
};

/** Expert outputs (T*k, dim) back to their tokens (T, dim), weighted by the routing weights and summed. */
export function moeCombine(g: Graph, x: number, r: MoeRouting, name: string): number {
  const dim = g.info(x).shape[1];
  const out = g.tensor([r.tokens, dim], g.info(x).dtype, "activation", name);
  addKernelNode(g, "moeCombine", { x, slots: r.slots, scale: r.weights, out }, { tokens: r.tokens, topK: r.topK, dim, dtype: g.info(x).dtype }, { grad: "moeCombine" });
  return out;
}

export const moeCombineGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  const g = b.graph;
  const args = kernelAttrs(node).args;
  const x = operandOf(node, "x");
  const slots = operandOf(node, "slots");
  const scale = operandOf(node, "scale");
  if (b.needsGrad(x)) {
    const dX = b.activation(g.info(x).shape, x, `d(${g.info(x).name})`);
    addKernelNode(g, "moeDispatch", { x: dOut, slots, scale, out: dX }, { ...args });
    b.addGrad(x, dX);
  }
  if (b.needsGrad(scale)) {
    const dScale = b.activation(g.info(scale).shape, scale, `d(${g.info(scale).name})`);
    addKernelNode(g, "moeCombineScaleGrad", { dOut, x, slots, dScale }, { ...args });
    b.addGrad(scale, dScale);
  }
};

/**
 * One linear layer per expert over expert-sorted rows: y[r] = x[r] · W_e^T for the
 * rows e owns (offsets). w is (E, out, in), torch.nn.Linear's layout per expert.
 */
export function groupedLinear(g: Graph, x: number, w: number, offsets: number, name: string): number {
  const [rows, inF] = g.info(x).shape;
  const [groups, outF, wIn] = g.info(w).shape;
  if (wIn !== inF) throw new Error(`${name}: input has ${inF} features, weight ${g.info(w).name} expects ${wIn}`);
  const y = g.tensor([rows, outF], g.info(x).dtype, "activation", name);
  addKernelNode(g, "groupedMatmul", { a: x, b: w, offsets, c: y }, { rows, n: outF, k: inF, groups, transB: true, dtype: g.info(x).dtype }, { grad: "groupedLinear" });
  return y;
}

export const groupedLinearGrad: GradRule = (node, b, [dY]) => {
  if (dY === undefined) return;
  const g = b.graph;
  const { rows, n: outF, k: inF, groups, dtype } = kernelAttrs(node).args as { rows: number; n: number; k: number; groups: number; dtype: FloatDType };
  const x = operandOf(node, "a");
  const w = operandOf(node, "b");
  const offsets = operandOf(node, "offsets");
  if (b.needsGrad(x)) {
    // dX (rows, in) = dY (rows, out) · W_e as (out, in)
    const dX = b.activation([rows, inF], x, `d(${g.info(x).name})`);
    addKernelNode(g, "groupedMatmul", { a: dY, b: w, offsets, c: dX }, { rows, n: inF, k: outF, groups, dtype });
    b.addGrad(x, dX);
  }
  if (b.needsGrad(w)) {
    const dB = b.paramGrad(w);
    addKernelNode(g, "groupedMatmulWeightGrad", { a: x, dC: dY, offsets, dB }, { rows, n: outF, k: inF, groups, dtype, ...gradDtypeArg(g, dB, dtype) });
  }
};
