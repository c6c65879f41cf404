import type { CrossEntropyBackwardArgs, CrossEntropyForwardArgs, SoftmaxForwardArgs } from "../kernels/cross-entropy.js";
import type { OracleKernel } from "./types.js";
import { checkIndex } from "./check-index.js";

function rowLogSumExp(x: Float64Array, o: number, n: number, invT = 1): number {
  let max = -Infinity;
  for (let j = 0; j < n; j++) max = Math.max(max, x[o + j] * invT);
  let s = 0;
  for (let j = 0; j < n; j++) s += Math.exp(x[o + j] * invT - max);
  return max + Math.log(s);
}

export const crossEntropyForwardOracle: OracleKernel<CrossEntropyForwardArgs> = (a, v) => {
  for (let r = 0; r < a.rows; r++) {
    const o = r * a.vocab;
    const lse = rowLogSumExp(v.logits, o, a.vocab);
    const t = v.targets[r];
    v.lse[r] = lse;
    v.losses[r] = t < 0 ? 0 : lse - v.logits[o + checkIndex("crossEntropyForward", t, a.vocab, r)];
  }
  if (v.dLogits) crossEntropyBackwardOracle({ ...a, lossScale: a.lossScale ?? 1 } as CrossEntropyBackwardArgs, v);
};

export const crossEntropyBackwardOracle: OracleKernel<CrossEntropyBackwardArgs> = (a, v) => {
  for (let r = 0; r < a.rows; r++) {
    const o = r * a.vocab;
    const t = v.targets[r];
    if (t < 0) {
      v.dLogits.fill(0, o, o + a.vocab);
      continue;
    }
    checkIndex("crossEntropyBackward", t, a.vocab, r);
    const lse = v.lse[r];
    for (let j = 0; j < a.vocab; j++) {
      v.dLogits[o + j] = a.lossScale * (Math.exp(v.logits[o + j] - lse) - (j === t ? 1 : 0));
    }
  }
};

export const softmaxForwardOracle: OracleKernel<SoftmaxForwardArgs> = (a, v) => {
  const invT = 1 / (a.temperature ?? 1);
  for (let r = 0; r < a.rows; r++) {
    const o = r * a.dim;
    const lse = rowLogSumExp(v.x, o, a.dim, invT);
    for (let j = 0; j < a.dim; j++) v.out[o + j] = Math.exp(v.x[o + j] * invT - lse);
  }
};
