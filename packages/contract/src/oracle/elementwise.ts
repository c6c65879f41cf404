import { type DropoutArgs, dropoutKeeps, dropoutScale } from "../kernels/dropout.js";
import type { AddArgs, ScaleArgs } from "../kernels/elementwise.js";
import type { ReduceArgs } from "../kernels/reduce.js";
import type { OracleKernel } from "./types.js";

export const addOracle: OracleKernel<AddArgs> = (a, v) => {
  for (let i = 0; i < a.n; i++) v.out[i] = v.a[i] + v.b[i];
};

export const scaleOracle: OracleKernel<ScaleArgs> = (a, v) => {
  for (let i = 0; i < a.n; i++) v.out[i] = a.alpha * v.x[i];
};

export const dropoutOracle: OracleKernel<DropoutArgs> = (a, v) => {
  const scale = dropoutScale(a.p);
  for (let i = 0; i < a.n; i++) v.out[i] = dropoutKeeps(a.p, a.seed, i) ? scale * v.x[i] : 0;
};

export const sumOracle: OracleKernel<ReduceArgs> = (a, v) => {
  let s = a.accumulate ? v.out[0] : 0;
  for (let i = 0; i < a.n; i++) s += v.x[i];
  v.out[0] = s;
};

export const sumSquaresOracle: OracleKernel<ReduceArgs> = (a, v) => {
  let s = a.accumulate ? v.out[0] : 0;
  for (let i = 0; i < a.n; i++) s += v.x[i] * v.x[i];
  v.out[0] = s;
};
