import { type AttentionBackwardArgs, type AttentionForwardArgs, attentionLayout, firstKey } from "../kernels/attention.js";
import type { OracleKernel } from "./types.js";

function dot(x: Float64Array, xo: number, y: Float64Array, yo: number, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) s += x[xo + i] * y[yo + i];
  return s;
}

// D is the query/key head size, DV the value/output head size.

export const attentionForwardOracle: OracleKernel<AttentionForwardArgs> = (a, v) => {
  const { batch: B, seqLen: T, heads: H, headDim: D } = a;
  const l = attentionLayout(a);
  const DV = l.vHeadDim;
  const scores = new Float64Array(T);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / l.group);
      for (let t = 0; t < T; t++) {
        const qo = (b * T + t) * l.qRowStride + h * D;
        const u0 = firstKey(t, l.window, v.docStarts?.[b * T + t]);
        let max = -Infinity;
        for (let u = u0; u <= t; u++) {
          scores[u] = l.scale * dot(v.q, qo, v.k, (b * T + u) * l.kvRowStride + kvh * D, D);
          max = Math.max(max, scores[u]);
        }
        let sum = 0;
        for (let u = u0; u <= t; u++) sum += Math.exp(scores[u] - max);
        const lse = max + Math.log(sum);
        const oo = (b * T + t) * l.outRowStride + h * DV;
        for (let d = 0; d < DV; d++) v.out[oo + d] = 0;
        for (let u = u0; u <= t; u++) {
          const p = Math.exp(scores[u] - lse);
          const vo = (b * T + u) * l.vRowStride + kvh * DV;
          for (let d = 0; d < DV; d++) v.out[oo + d] += p * v.v[vo + d];
        }
        v.lse[(b * H + h) * T + t] = lse;
      }
    }
  }
};

export const attentionBackwardOracle: OracleKernel<AttentionBackwardArgs> = (a, v) => {
  const { batch: B, seqLen: T, heads: H, kvHeads: KH, headDim: D } = a;
  const l = attentionLayout(a);
  const DV = l.vHeadDim;
  // Zero the logical regions of the gradients (strided gaps stay as they are).
  for (let r = 0; r < B * T; r++) {
    v.dQ.fill(0, r * l.qRowStride, r * l.qRowStride + H * D);
    v.dK.fill(0, r * l.kvRowStride, r * l.kvRowStride + KH * D);
    v.dV.fill(0, r * l.vRowStride, r * l.vRowStride + KH * DV);
  }
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / l.group);
      for (let t = 0; t < T; t++) {
        const qo = (b * T + t) * l.qRowStride + h * D;
        const oo = (b * T + t) * l.outRowStride + h * DV;
        const lse = v.lse[(b * H + h) * T + t];
        const dOutDotOut = dot(v.dOut, oo, v.out, oo, DV);
        for (let u = firstKey(t, l.window, v.docStarts?.[b * T + t]); u <= t; u++) {
          const ko = (b * T + u) * l.kvRowStride + kvh * D;
          const vo = (b * T + u) * l.vRowStride + kvh * DV;
          const p = Math.exp(l.scale * dot(v.q, qo, v.k, ko, D) - lse);
          const dp = dot(v.dOut, oo, v.v, vo, DV);
          const ds = p * (dp - dOutDotOut);
          for (let d = 0; d < D; d++) {
            v.dQ[qo + d] += l.scale * ds * v.k[ko + d];
            v.dK[ko + d] += l.scale * ds * v.q[qo + d];
          }
          for (let d = 0; d < DV; d++) v.dV[vo + d] += p * v.dOut[oo + d];
        }
      }
    }
  }
};
