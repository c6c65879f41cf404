import type { SwiGluBackwardArgs, SwiGluForwardArgs, UnaryBackwardArgs, UnaryForwardArgs } from "../kernels/activation.js";
import type { OracleKernel } from "./types.js";

const GELU_C = Math.sqrt(2 / Math.PI);

export function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(GELU_C * (x + 0.044715 * x * x * x)));
}

export function geluGrad(x: number): number {
  const t = Math.tanh(GELU_C * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x);
}

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

export function silu(x: number): number {
  return x * sigmoid(x);
}

export function siluGrad(x: number): number {
  const s = sigmoid(x);
  return s * (1 + x * (1 - s));
}

function unaryForward(f: (x: number) => number): OracleKernel<UnaryForwardArgs> {
  return (a, v) => {
    for (let i = 0; i < a.n; i++) v.out[i] = f(v.x[i]);
  };
}

function unaryBackward(df: (x: number) => number): OracleKernel<UnaryBackwardArgs> {
  return (a, v) => {
    for (let i = 0; i < a.n; i++) v.dX[i] = df(v.x[i]) * v.dOut[i];
    if (v.dXColSums) for (let i = 0; i < a.n; i++) v.dXColSums[i % a.cols!] += v.dX[i];
  };
}

export const geluForwardOracle = unaryForward(gelu);
export const geluBackwardOracle = unaryBackward(geluGrad);
export const siluForwardOracle = unaryForward(silu);
export const siluBackwardOracle = unaryBackward(siluGrad);

const gateOf = (a: { activation?: string }) => (a.activation === "gelu" ? { f: gelu, df: geluGrad } : { f: silu, df: siluGrad });

export const swiGluForwardOracle: OracleKernel<SwiGluForwardArgs> = (a, v) => {
  const { f } = gateOf(a);
  for (let i = 0; i < a.n; i++) v.out[i] = f(v.gate[i]) * v.up[i];
};

export const swiGluBackwardOracle: OracleKernel<SwiGluBackwardArgs> = (a, v) => {
  const { f, df } = gateOf(a);
  for (let i = 0; i < a.n; i++) {
    const g = v.gate[i], d = v.dOut[i];
    v.dGate[i] = d * v.up[i] * df(g);
    v.dUp[i] = d * f(g);
  }
};
