import type { DType, Mamba3ScanDims } from "@kiln/contract";
import { mamba3StateElements } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { addKernelNode } from "../graph/kernel-node.js";
import { type GradRule, gradDtypeArg, kernelAttrs, operandOf } from "./grad-rule.js";

/** Mamba3's per-head parameters: B and C biases (heads, stateSize); dt's bias, A = -exp(aLog), the D skip (heads). */
export interface Mamba3ScanParams {
  bBias: number;
  cBias: number;
  dtBias: number;
  aLog: number;
  D: number;
}

/** The scan's per-token inputs: x (rows, heads·headDim), dt and λ before their activations (rows, heads), θ (rows, heads·stateSize/2) or none. */
export interface Mamba3ScanInputs {
  x: number;
  dt: number;
  lambda: number;
  theta?: number;
  /** The normalised [B | C] rows (rows, 2·groups·stateSize). */
  bc: number;
}

type Dims = Omit<Mamba3ScanDims, "xRowStride" | "dtRowStride" | "bcRowStride">;

/**
 * The trapezoidal scan with the data-dependent rotation (contract kernel mamba3ScanForward).
 * Every input is dense; B and C are the two halves of each `bc` row. Returns y
 * (rows, heads·headDim); keeps the f32 chunk-entry states for the backward pass.
 */
export function mamba3Scan(g: Graph, inputs: Mamba3ScanInputs, p: Mamba3ScanParams, dims: Dims, name: string): number {
  const { x, dt, lambda, theta, bc } = inputs;
  const [rows, width] = g.info(x).shape;
  const gn = dims.groups * dims.stateSize;
  if (width !== dims.heads * dims.headDim) throw new Error(`${name}: rows of ${width} are not ${dims.heads} heads of ${dims.headDim}`);
  if (g.info(bc).shape[1] !== 2 * gn) throw new Error(`${name}: B and C rows of ${g.info(bc).shape[1]} are not 2 x ${gn}`);
  const dtype = g.info(x).dtype;
  const y = g.tensor([rows, width], dtype, "activation", name);
  const states = g.tensor([mamba3StateElements(dims)], "f32", "activation", `${name}.states`);
  addKernelNode(
    g,
    "mamba3ScanForward",
    { x, dt, lambda, ...(theta === undefined ? {} : { theta }), B: bc, C: { id: bc, offset: gn }, ...p, y, states },
    { ...dims, bcRowStride: 2 * gn, dtype },
    { grad: "mamba3Scan" },
  );
  return y;
}

/** dB and dC land in one tensor laid out like [B | C]; the parameters' gradients accumulate. */
export const mamba3ScanGrad: GradRule = (node, b, [dY]) => {
  if (dY === undefined) return;
  const a = kernelAttrs(node);
  const g = b.graph;
  const like = (key: string) => {
    const id = operandOf(node, key);
    return b.activation(g.info(id).shape, id, `d(${g.info(id).name})`);
  };
  const x = operandOf(node, "x"), dt = operandOf(node, "dt"), lambda = operandOf(node, "lambda"), bc = operandOf(node, "B");
  const theta = a.operands.theta?.id;
  const dX = like("x"), dDt = like("dt"), dLambda = like("lambda"), dBc = like("B");
  const dTheta = theta === undefined ? undefined : like("theta");
  const param = (key: string) => b.paramGrad(operandOf(node, key));
  addKernelNode(
    g,
    "mamba3ScanBackward",
    {
      dY,
      x,
      dt,
      lambda,
      ...(theta === undefined ? {} : { theta, dTheta }),
      B: a.operands.B,
      C: a.operands.C,
      ...Object.fromEntries(["bBias", "cBias", "dtBias", "aLog", "D", "states"].map((k) => [k, operandOf(node, k)])),
      dX,
      dDt,
      dLambda,
      dB: { id: dBc, offset: a.operands.B.offset ?? 0 },
      dC: { id: dBc, offset: a.operands.C.offset ?? 0 },
      dBBias: param("bBias"),
      dCBias: param("cBias"),
      dDtBias: param("dtBias"),
      dALog: param("aLog"),
      dD: param("D"),
    },
    { ...a.args, ...gradDtypeArg(g, param("D"), a.args.dtype as DType) },
  );
  b.addGrad(x, dX);
  b.addGrad(dt, dDt);
  b.addGrad(lambda, dLambda);
  b.addGrad(bc, dBc);
  if (theta !== undefined) b.addGrad(theta, dTheta!);
};
