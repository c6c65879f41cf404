import type { MatmulArrays } from "../src/index.js";

/**
 * The matmul of MatmulArrays in plain f64 loops, plus, per element of C, the
 * sum of magnitudes of everything added into it (for an error bound).
 */
export function referenceMatmul(a: Float32Array, b: Float32Array, o: MatmulArrays): { c: Float64Array; magnitude: Float64Array } {
  const { m, n, k } = o;
  const batch = o.batch ?? 1;
  const sa = o.strideA ?? m * k;
  const sb = o.strideB ?? k * n;
  const sc = o.strideC ?? m * n;
  const alpha = o.alpha ?? 1;
  const c = new Float64Array((batch - 1) * sc + m * n);
  const magnitude = new Float64Array(c.length);
  if (o.out) c.set(o.out.subarray(0, c.length));
  for (let bi = 0; bi < batch; bi++) {
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let sum = 0;
        let mag = 0;
        for (let p = 0; p < k; p++) {
          const av = o.transA ? a[bi * sa + p * m + i] : a[bi * sa + i * k + p];
          const bv = o.transB ? b[bi * sb + j * k + p] : b[bi * sb + p * n + j];
          sum += av * bv;
          mag += Math.abs(av * bv);
        }
        const at = bi * sc + i * n + j;
        const prior = o.accumulate ? c[at] : 0;
        const bias = o.bias ? o.bias[j] : 0;
        c[at] = prior + alpha * sum + bias;
        magnitude[at] = Math.abs(prior) + Math.abs(alpha) * mag + Math.abs(bias);
      }
    }
  }
  return { c, magnitude };
}

/** Deterministic values in [-1, 1). */
export function randomArray(length: number, seed: number): Float32Array {
  const out = new Float32Array(length);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = ((s >>> 0) / 2 ** 32) * 2 - 1;
  }
  return out;
}
