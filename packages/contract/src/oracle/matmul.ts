import { type MatmulArgs, type SumRowsArgs, matmulStrides } from "../kernels/matmul.js";
import type { OracleKernel } from "./types.js";

export const matmulOracle: OracleKernel<MatmulArgs> = (args, v) => {
  const { m, n, k } = args;
  const { batch, strideA, strideB, strideC } = matmulStrides(args);
  const alpha = args.alpha ?? 1;
  const a = v.a, b = v.b, c = v.c, bias = v.bias;
  for (let bi = 0; bi < batch; bi++) {
    const oa = bi * strideA, ob = bi * strideB, oc = bi * strideC;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) {
          const av = args.transA ? a[oa + p * m + i] : a[oa + i * k + p];
          const bv = args.transB ? b[ob + j * k + p] : b[ob + p * n + j];
          s += av * bv;
        }
        let r = alpha * s + (bias ? bias[j] : 0);
        if (args.accumulate) r += c[oc + i * n + j];
        c[oc + i * n + j] = r;
      }
    }
  }
};

export const sumRowsOracle: OracleKernel<SumRowsArgs> = (args, v) => {
  for (let j = 0; j < args.cols; j++) {
    let s = args.accumulate ? v.out[j] : 0;
    for (let i = 0; i < args.rows; i++) s += v.x[i * args.cols + j];
    v.out[j] = s;
  }
};
