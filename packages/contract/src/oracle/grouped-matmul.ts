import type { GroupedMatmulArgs, GroupedMatmulWeightGradArgs } from "../kernels/grouped-matmul.js";
import { KernelArgumentError } from "../errors.js";
import type { OracleKernel } from "./types.js";

/** The group boundaries, checked: start at 0, never decrease, end at `rows`. */
function groupBounds(kernel: string, offsets: Float64Array, groups: number, rows: number): number[] {
  const o = Array.from(offsets.subarray(0, groups + 1));
  const bad = o[0] !== 0 || o[groups] !== rows || o.some((x, i) => i > 0 && x < o[i - 1]);
  if (bad) throw new KernelArgumentError(`offsets [${o.join(", ")}] do not split ${rows} rows into ${groups} groups`, { where: kernel, hint: "offsets must start at 0, never decrease and end at rows" });
  return o;
}

export const groupedMatmulOracle: OracleKernel<GroupedMatmulArgs> = (a, v) => {
  const { n, k } = a;
  const o = groupBounds("groupedMatmul", v.offsets, a.groups, a.rows);
  for (let g = 0; g < a.groups; g++) {
    const b = g * k * n;
    for (let r = o[g]; r < o[g + 1]; r++) {
      for (let j = 0; j < n; j++) {
        let s = a.accumulate ? v.c[r * n + j] : 0;
        for (let p = 0; p < k; p++) s += v.a[r * k + p] * (a.transB ? v.b[b + j * k + p] : v.b[b + p * n + j]);
        v.c[r * n + j] = s;
      }
    }
  }
};

export const groupedMatmulWeightGradOracle: OracleKernel<GroupedMatmulWeightGradArgs> = (a, v) => {
  const { n, k } = a;
  const o = groupBounds("groupedMatmulWeightGrad", v.offsets, a.groups, a.rows);
  for (let g = 0; g < a.groups; g++) {
    for (let j = 0; j < n; j++) {
      for (let p = 0; p < k; p++) {
        let s = v.dB[g * n * k + j * k + p];
        for (let r = o[g]; r < o[g + 1]; r++) s += v.dC[r * n + j] * v.a[r * k + p];
        v.dB[g * n * k + j * k + p] = s;
      }
    }
  }
};
