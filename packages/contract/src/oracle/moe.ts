import type { MoeCombineArgs, MoeCombineScaleGradArgs, MoeDispatchArgs, MoeRouteArgs, MoeRouteBackwardArgs } from "../kernels/moe.js";
import { checkIndex } from "./check-index.js";
import type { OracleKernel } from "./types.js";

export const moeRouteOracle: OracleKernel<MoeRouteArgs> = (a, v) => {
  const { tokens: T, numExperts: E, topK: k } = a;
  const counts = new Array<number>(E).fill(0);
  const meanProb = new Array<number>(E).fill(0);
  for (let t = 0; t < T; t++) {
    const z = v.logits.subarray(t * E, (t + 1) * E);
    const max = Math.max(...z);
    let sum = 0;
    for (let e = 0; e < E; e++) sum += Math.exp(z[e] - max);
    for (let e = 0; e < E; e++) {
      v.probs[t * E + e] = Math.exp(z[e] - max) / sum;
      meanProb[e] += v.probs[t * E + e] / T;
    }
    // Largest logits first; equal logits: the lower expert index first.
    const order = [...Array(E).keys()].sort((x, y) => z[y] - z[x] || x - y).slice(0, k);
    let chosen = 0;
    for (const e of order) chosen += v.probs[t * E + e];
    order.forEach((e, j) => {
      v.experts[t * k + j] = e;
      v.weights[t * k + j] = v.probs[t * E + e] / chosen;
      counts[e]++;
    });
  }
  v.offsets[0] = 0;
  for (let e = 0; e < E; e++) v.offsets[e + 1] = v.offsets[e] + counts[e];
  const next = Array.from(v.offsets.subarray(0, E));
  for (let t = 0; t < T; t++) for (let j = 0; j < k; j++) v.slots[t * k + j] = next[v.experts[t * k + j]]++;
  let aux = 0;
  for (let e = 0; e < E; e++) aux += (counts[e] / (T * k)) * meanProb[e];
  v.auxLoss[0] = a.alpha * E * aux;
};

export const moeRouteBackwardOracle: OracleKernel<MoeRouteBackwardArgs> = (a, v) => {
  const { tokens: T, numExperts: E, topK: k } = a;
  const g = new Array<number>(E);
  for (let e = 0; e < E; e++) g[e] = (a.auxScale * a.alpha * E * ((v.offsets[e + 1] - v.offsets[e]) / (T * k))) / T;
  for (let t = 0; t < T; t++) {
    const p = v.probs.subarray(t * E, (t + 1) * E);
    let pg = 0;
    for (let e = 0; e < E; e++) pg += p[e] * g[e];
    for (let e = 0; e < E; e++) v.dLogits[t * E + e] = p[e] * (g[e] - pg);
    let wd = 0;
    for (let j = 0; j < k; j++) wd += v.weights[t * k + j] * v.dWeights[t * k + j];
    for (let j = 0; j < k; j++) {
      const e = checkIndex("moeRouteBackward", v.experts[t * k + j], E, t * k + j);
      v.dLogits[t * E + e] += v.weights[t * k + j] * (v.dWeights[t * k + j] - wd);
    }
  }
};

export const moeDispatchOracle: OracleKernel<MoeDispatchArgs> = (a, v) => {
  const n = a.tokens * a.topK;
  for (let t = 0; t < a.tokens; t++) {
    for (let j = 0; j < a.topK; j++) {
      const s = checkIndex("moeDispatch", v.slots[t * a.topK + j], n, t * a.topK + j);
      const w = v.scale ? v.scale[t * a.topK + j] : 1;
      for (let d = 0; d < a.dim; d++) v.out[s * a.dim + d] = w * v.x[t * a.dim + d];
    }
  }
};

export const moeCombineOracle: OracleKernel<MoeCombineArgs> = (a, v) => {
  const n = a.tokens * a.topK;
  for (let t = 0; t < a.tokens; t++) {
    for (let d = 0; d < a.dim; d++) {
      let sum = a.accumulate ? v.out[t * a.dim + d] : 0;
      for (let j = 0; j < a.topK; j++) {
        const s = checkIndex("moeCombine", v.slots[t * a.topK + j], n, t * a.topK + j);
        sum += (v.scale ? v.scale[t * a.topK + j] : 1) * v.x[s * a.dim + d];
      }
      v.out[t * a.dim + d] = sum;
    }
  }
};

export const moeCombineScaleGradOracle: OracleKernel<MoeCombineScaleGradArgs> = (a, v) => {
  const n = a.tokens * a.topK;
  for (let t = 0; t < a.tokens; t++) {
    for (let j = 0; j < a.topK; j++) {
      const s = checkIndex("moeCombineScaleGrad", v.slots[t * a.topK + j], n, t * a.topK + j);
      let dot = 0;
      for (let d = 0; d < a.dim; d++) dot += v.dOut[t * a.dim + d] * v.x[s * a.dim + d];
      v.dScale[t * a.topK + j] = dot;
    }
  }
};
