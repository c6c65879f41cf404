import type { CopyStridedArgs } from "../kernels/copy.js";
import type { OracleKernel } from "./types.js";

/** Values arrive decoded; the sum of an accumulate is rounded to the dtype when stored. */
export const copyStridedOracle: OracleKernel<CopyStridedArgs> = (a, v) => {
  for (let b = 0; b < a.batch; b++) {
    for (let r = 0; r < a.rows; r++) {
      const s = b * a.srcBatchStride + r * a.srcRowStride;
      const d = b * a.dstBatchStride + r * a.dstRowStride;
      for (let c = 0; c < a.cols; c++) v.dst[d + c] = a.accumulate ? v.dst[d + c] + v.src[s + c] : v.src[s + c];
    }
  }
};
