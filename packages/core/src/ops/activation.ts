import type { GateActivation } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, kernelAttrs, operandOf } from "./grad-rule.js";

/** An element-wise activation: its op (forward kernel, gradient rule named `grad`) and its gradient rule. */
function unaryActivation(forward: "geluForward" | "siluForward", backward: "geluBackward" | "siluBackward", grad: string) {
  const op = (g: Graph, x: number, name: string): number => {
    const out = g.tensor(g.info(x).shape, g.info(x).dtype, "activation", name);
    addKernelNode(g, forward, { x, out }, { n: g.elements(x), dtype: g.info(x).dtype }, { grad });
    return out;
  };
  const rule: GradRule = (node, b, [dOut]) => {
    const x = operandOf(node, "x");
    if (dOut === undefined || !b.needsGrad(x)) return;
    const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
    addKernelNode(b.graph, backward, { x, dOut, dX }, { ...kernelAttrs(node).args });
    b.addGrad(x, dX);
  };
  return [op, rule] as const;
}

/** GELU (tanh approximation), element-wise. */
export const [gelu, geluGrad] = unaryActivation("geluForward", "geluBackward", "gelu");

/** SiLU, x·sigmoid(x), element-wise (Mamba2 after its convolution). */
export const [silu, siluGrad] = unaryActivation("siluForward", "siluBackward", "silu");

/** SwiGLU: silu(gate) * up, element-wise (Llama's MLP); GeGLU, gelu(gate) * up, with activation "gelu" (Gemma's). */
export function swiGlu(g: Graph, gate: number, up: number, name: string, activation: GateActivation = "silu"): number {
  const out = g.tensor(g.info(gate).shape, g.info(gate).dtype, "activation", name);
  const args = { n: g.elements(gate), dtype: g.info(gate).dtype, ...(activation !== "silu" ? { activation } : {}) };
  addKernelNode(g, "swiGluForward", { gate, up, out }, args, { grad: "swiGlu" });
  return out;
}

export const swiGluGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  const gate = operandOf(node, "gate");
  const up = operandOf(node, "up");
  const dGate = b.activation(b.graph.info(gate).shape, gate, `d(${b.graph.info(gate).name})`);
  const dUp = b.activation(b.graph.info(up).shape, up, `d(${b.graph.info(up).name})`);
  addKernelNode(b.graph, "swiGluBackward", { gate, up, dOut, dGate, dUp }, { ...kernelAttrs(node).args });
  b.addGrad(gate, dGate);
  b.addGrad(up, dUp);
};

