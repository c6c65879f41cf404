import type { AdamWArgs } from "../kernels/adamw.js";
import type { OracleKernel } from "./types.js";

export const adamWOracle: OracleKernel<AdamWArgs> = (a, v) => {
  const gs = a.gradScale ?? 1;
  const bc1 = 1 - a.beta1 ** a.step;
  const bc2 = 1 - a.beta2 ** a.step;
  const w = v.master ?? v.param;
  for (let i = 0; i < a.n; i++) {
    const g = v.grad[i] * gs;
    let p = w[i];
    p -= a.lr * a.weightDecay * p;
    const m = a.beta1 * v.m[i] + (1 - a.beta1) * g;
    const s = a.beta2 * v.v[i] + (1 - a.beta2) * g * g;
    p -= (a.lr * (m / bc1)) / (Math.sqrt(s / bc2) + a.eps);
    v.m[i] = m;
    v.v[i] = s;
    w[i] = p;
    v.param[i] = p;
  }
};
