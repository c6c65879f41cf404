import { type RopeArgs, ropeInvFreq, ropeRowStride } from "../kernels/rope.js";
import type { OracleKernel } from "./types.js";

/** Rotates each head's (i, i+half) pairs by sign * angle(position, i). */
function rotate(a: RopeArgs, src: Float64Array, dst: Float64Array, sign: number, v: Record<string, Float64Array>): void {
  const half = a.headDim / 2;
  const stride = ropeRowStride(a);
  const rows = a.batch * a.seqLen;
  const freq = ropeInvFreq(a);
  for (let r = 0; r < rows; r++) {
    const pos = (a.posOffset ?? 0) + (r % a.seqLen) - (v.docStarts?.[r] ?? 0);
    for (let h = 0; h < a.heads; h++) {
      const o = r * stride + h * a.headDim;
      for (let i = 0; i < half; i++) {
        const angle = sign * pos * freq[i];
        const c = Math.cos(angle), s = Math.sin(angle);
        const x0 = src[o + i], x1 = src[o + i + half];
        dst[o + i] = x0 * c - x1 * s;
        dst[o + i + half] = x1 * c + x0 * s;
      }
    }
  }
}

export const ropeForwardOracle: OracleKernel<RopeArgs> = (a, v) => rotate(a, v.x, v.out, 1, v);
export const ropeBackwardOracle: OracleKernel<RopeArgs> = (a, v) => rotate(a, v.x, v.out, -1, v);
