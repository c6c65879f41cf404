import { type Conv1dCausalBackwardArgs, type Conv1dCausalForwardArgs, conv1dRowStride } from "../kernels/conv1d.js";
import type { OracleKernel } from "./types.js";

/** out[b,t,c] = bias[c] + sum_j weight[c,j] x[b, t-(K-1)+j, c], x before t = 0 read as zero. */
export const conv1dCausalForwardOracle: OracleKernel<Conv1dCausalForwardArgs> = (a, v) => {
  const { batch, seqLen, channels: C, kernelSize: K } = a;
  const rs = conv1dRowStride(a);
  for (let b = 0; b < batch; b++) {
    for (let t = 0; t < seqLen; t++) {
      const o = (b * seqLen + t) * C;
      for (let c = 0; c < C; c++) {
        let s = v.bias ? v.bias[c] : 0;
        for (let j = 0; j < K; j++) {
          const tx = t - (K - 1) + j;
          if (tx >= 0) s += v.weight[c * K + j] * v.x[(b * seqLen + tx) * rs + c];
        }
        v.out[o + c] = s;
      }
    }
  }
};

/** dX overwritten (dense); dWeight and dBias accumulate. */
export const conv1dCausalBackwardOracle: OracleKernel<Conv1dCausalBackwardArgs> = (a, v) => {
  const { batch, seqLen, channels: C, kernelSize: K } = a;
  const rs = conv1dRowStride(a);
  v.dX.fill(0);
  for (let b = 0; b < batch; b++) {
    for (let t = 0; t < seqLen; t++) {
      const o = (b * seqLen + t) * C;
      for (let c = 0; c < C; c++) {
        const g = v.dOut[o + c];
        if (v.dBias) v.dBias[c] += g;
        for (let j = 0; j < K; j++) {
          const tx = t - (K - 1) + j;
          if (tx < 0) continue;
          v.dWeight[c * K + j] += g * v.x[(b * seqLen + tx) * rs + c];
          v.dX[(b * seqLen + tx) * C + c] += g * v.weight[c * K + j];
        }
      }
    }
  }
};
