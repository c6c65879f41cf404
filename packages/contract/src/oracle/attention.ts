import { type AttentionBackwardArgs, type AttentionForwardArgs, attentionLayout } from "../kernels/attention.js";
import type { OracleKernel } from "./types.js";

function dot(x: Float64Array, xo: number, y: Float64Array, yo: number, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) s += x[xo + i] * y[yo + i];
  return s;
}

export const attentionForwardOracle: OracleKernel<AttentionForwardArgs> = (a, v) => {
  const { batch: B, seqLen: T, heads: H, headDim: D } = a;
  const l = attentionLayout(a);
  const scores = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / l.group);
      for (let t = 0; t < T; t++) {
        const qo = (b * T + t) * l.qRowStride + h * D;
        let max = -Infinity;
        for (let u = 0; u <= t; u++) {
          scores[u] = l.scale * dot(v.q, qo, v.k, (b * T + u) * l.kvRowStride + kvh * D, D);
          max = Math.max(max, scores[u]);
        }
        let sum = 0;
        for (let u = 0; u <= t; u++) sum += Math.exp(scores[u] - max);
        const lse = max + Math.log(sum);
        const oo = (b * T + t) * l.outRowStride + h * D;
        for (let d = 0; d < D; d++) v.out[oo + d] = 0;
        for (let u = 0; u <= t; u++) {
          const p = Math.exp(scores[u] - lse);
          const vo = (b * T + u) * l.kvRowStride + kvh * D;
          for (let d = 0; d < D; d++) v.out[oo + d] += p * v.v[vo + d];
        }
        v.lse[(b * H + h) * T + t] = lse;
      }
    }
  }
};

export const attentionBackwardOracle: OracleKernel<AttentionBackwardArgs> = (a, v) => {
  const { batch: B, seqLen: T, heads: H, kvHeads: KH, headDim: D } = a;
  const l = attentionLayout(a);
  // Zero the logical regions of the gradients (strided gaps stay as they are).
  for (let r = 0; r < B * T; r++) {
    v.dQ.fill(0, r * l.qRowStride, r * l.qRowStride + H * D);
    v.dK.fill(0, r * l.kvRowStride, r * l.kvRowStride + KH * D);
    v.dV.fill(0, r * l.kvRowStride, r * l.kvRowStride + KH * D);
  }
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / l.group);
      for (let t = 0; t < T; t++) {
        const qo = (b * T + t) * l.qRowStride + h * D;
        const oo = (b * T + t) * l.outRowStride + h * D;
        const lse = v.lse[(b * H + h) * T + t];
        const dOutDotOut = dot(v.dOut, oo, v.out, oo, D);
        for (let u = 0; u <= t; u++) {
          const ko = (b * T + u) * l.kvRowStride + kvh * D;
          const p = Math.exp(l.scale * dot(v.q, qo, v.k, ko, D) - lse);
          const dp = dot(v.dOut, oo, v.v, ko, D);
          const ds = p * (dp - dOutDotOut);
          for (let d = 0; d < D; d++) {
            v.dQ[qo + d] += l.scale * ds * v.k[ko + d];
            v.dK[ko + d] += l.scale * ds * v.q[qo + d];
            v.dV[ko + d] += p * v.dOut[oo + d];
          }
        }
      }
    }
  }
};
