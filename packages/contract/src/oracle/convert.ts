import type { CastArgs, CheckFiniteArgs, FillArgs } from "../kernels/convert.js";
import type { OracleKernel } from "./types.js";

/** Values arrive decoded; rounding to dstDtype happens when they are stored. */
export const castOracle: OracleKernel<CastArgs> = (a, v) => {
  for (let i = 0; i < a.n; i++) v.dst[i] = v.src[i];
};

export const fillOracle: OracleKernel<FillArgs> = (a, v) => {
  v.out.fill(a.value, 0, a.n);
};

export const checkFiniteOracle: OracleKernel<CheckFiniteArgs> = (a, v) => {
  for (let i = 0; i < a.n; i++) {
    if (!Number.isFinite(v.x[i])) {
      v.flag[0] = 1;
      return;
    }
  }
};
