import type { DType, SsdScanDims } from "@kiln/contract";
import { ssdStateElements } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/** Mamba2's per-head parameters: dt's bias, A = -exp(aLog), the D skip; each (heads). */
export interface SsdParams {
  dtBias: number;
  aLog: number;
  D: number;
}

/**
 * The selective state space scan (contract kernel ssdScanForward) over xbc, Mamba2's
 * convolved (batch*seqLen, heads*headDim + 2*groups*stateSize) rows [x | B | C], with dt
 * (batch*seqLen, heads) before its softplus. Returns y (batch*seqLen, heads*headDim);
 * keeps the f32 chunk-entry states for the backward pass.
 */
export function ssdScan(g: Graph, xbc: number, dt: number, p: SsdParams, dims: Omit<SsdScanDims, "xRowStride" | "dtRowStride" | "bcRowStride">, name: string): number {
  const [rows, width] = g.info(xbc).shape;
  const inner = dims.heads * dims.headDim, bc = dims.groups * dims.stateSize;
  if (width !== inner + 2 * bc) throw new Error(`${name}: rows of ${width} are not [x | B | C] = ${inner} + 2 x ${bc}`);
  const dtype = g.info(xbc).dtype;
  const y = g.tensor([rows, inner], dtype, "activation", name);
  const states = g.tensor([ssdStateElements(dims)], "f32", "activation", `${name}.states`);
  addKernelNode(
    g,
    "ssdScanForward",
    { x: xbc, B: { id: xbc, offset: inner }, C: { id: xbc, offset: inner + bc }, dt, dtBias: p.dtBias, aLog: p.aLog, D: p.D, y, states },
    { ...dims, xRowStride: width, bcRowStride: width, dtype },
    { grad: "ssdScan" },
  );
  return y;
}

/** dX, dB and dC land in one tensor laid out like xbc; the per-head parameters' gradients accumulate. */
export const ssdScanGrad: GradRule = (node, b, [dY]) => {
  if (dY === undefined) return;
  const a = kernelAttrs(node);
  const xbc = operandOf(node, "x");
  const dt = operandOf(node, "dt");
  const g = b.graph;
  const { B, C } = a.operands;
  const dXbc = b.activation(g.info(xbc).shape, xbc, `d(${g.info(xbc).name})`);
  const dDt = b.activation(g.info(dt).shape, dt, `d(${g.info(dt).name})`);
  addKernelNode(
    g,
    "ssdScanBackward",
    {
      dY,
      x: xbc,
      B,
      C,
      dt,
      dtBias: operandOf(node, "dtBias"),
      aLog: operandOf(node, "aLog"),
      D: operandOf(node, "D"),
      states: operandOf(node, "states"),
      dX: dXbc,
      dB: { id: dXbc, offset: B.offset },
      dC: { id: dXbc, offset: C.offset },
      dDt,
      dDtBias: b.paramGrad(operandOf(node, "dtBias")),
      dALog: b.paramGrad(operandOf(node, "aLog")),
      dD: b.paramGrad(operandOf(node, "D")),
    },
    { ...a.args, ...gradDtypeArg(g, b.paramGrad(operandOf(node, "D")), a.args.dtype as DType) },
  );
  b.addGrad(xbc, dXbc);
  b.addGrad(dt, dDt);
};
