import type { FloatDType } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/** LayerNorm over the last dim of x (rows, dim); saves mean and rstd for the backward pass. */
export function layerNorm(g: Graph, x: number, weight: number, bias: number | undefined, eps: number, name: string): number {
  const [rows, dim] = g.info(x).shape;
  const dtype = g.info(x).dtype;
  const out = g.tensor([rows, dim], dtype, "activation", name);
  const mean = g.tensor([rows], "f32", "activation", `${name}.mean`);
  const rstd = g.tensor([rows], "f32", "activation", `${name}.rstd`);
  addKernelNode(g, "layerNormForward", { x, weight, out, mean, rstd, ...(bias === undefined ? {} : { bias }) }, { rows, dim, eps, dtype }, { grad: "layerNorm" });
  return out;
}

export const layerNormGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  const { rows, dim, dtype, weightOffset } = kernelAttrs(node).args as { rows: number; dim: number; dtype: FloatDType; weightOffset?: number };
  const x = operandOf(node, "x");
  const weight = operandOf(node, "weight");
  const bias = kernelAttrs(node).operands.bias?.id;
  const dX = b.activation([rows, dim], x, `d(${b.graph.info(x).name})`);
  addKernelNode(
    b.graph,
    "layerNormBackward",
    {
      dOut,
      x,
      weight,
      mean: operandOf(node, "mean"),
      rstd: operandOf(node, "rstd"),
      dX,
      dWeight: b.paramGrad(weight),
      ...(bias === undefined ? {} : { dBias: b.paramGrad(bias) }),
    },
    { rows, dim, dtype, ...(weightOffset ? { weightOffset } : {}), ...gradDtypeArg(b.graph, b.paramGrad(weight), dtype) },
  );
  b.addGrad(x, dX);
};

/**
 * RMSNorm over the last dim of x (rows, dim); saves rstd. With `groupSize`, over each run of
 * groupSize elements instead (rows·dim / groupSize rows; Mamba3 normalises B and C per group,
 * Qwen3 and Gemma 3 each head). `weightOffset` is added to the weight (Gemma's 1 + weight).
 */
export function rmsNorm(g: Graph, x: number, weight: number, eps: number, name: string, groupSize?: number, weightOffset?: number): number {
  const shape = g.info(x).shape;
  const dim = groupSize ?? shape[shape.length - 1];
  const rows = g.elements(x) / dim;
  if (!Number.isInteger(rows)) throw new Error(`${name}: ${g.elements(x)} elements are not rows of ${dim}`);
  const dtype = g.info(x).dtype;
  const out = g.tensor(shape, dtype, "activation", name);
  const rstd = g.tensor([rows], "f32", "activation", `${name}.rstd`);
  addKernelNode(g, "rmsNormForward", { x, weight, out, rstd }, { rows, dim, eps, dtype, ...(weightOffset ? { weightOffset } : {}) }, { grad: "rmsNorm" });
  return out;
}

export const rmsNormGrad: GradRule = (node, b, [dOut]) => {
  if (dOut === undefined) return;
  const { rows, dim, dtype, weightOffset } = kernelAttrs(node).args as { rows: number; dim: number; dtype: FloatDType; weightOffset?: number };
  const x = operandOf(node, "x");
  const weight = operandOf(node, "weight");
  const dX = b.activation(b.graph.info(x).shape, x, `d(${b.graph.info(x).name})`);
  addKernelNode(
    b.graph,
    "rmsNormBackward",
    { dOut, x, weight, rstd: operandOf(node, "rstd"), dX, dWeight: b.paramGrad(weight) },
    { rows, dim, dtype, ...(weightOffset ? { weightOffset } : {}), ...gradDtypeArg(b.graph, b.paramGrad(weight), dtype) },
  );
  b.addGrad(x, dX);
};
