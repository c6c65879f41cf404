import { type MatmulArgs, type SumRowsArgs, matmulStrides } from "../kernels/matmul.js";
import type { OracleKernel } from "./types.js";

export const matmulOracle: OracleKernel<MatmulArgs> = (args, v) => {
  const { m, n, k } = args;
  const { batch, strideA, strideB, strideC, lda } = matmulStrides(args);
  const alpha = args.alpha ?? 1;
  const accumulate = Boolean(args.accumulate);
  const a = v.a, b = v.b, c = v.c, bias = v.bias;
  // op(A)[i][p] = a[oa + i * aRow + p * aStep], op(B)[p][j] = b[ob + p * bStep + j * bCol]
  const aRow = args.transA ? 1 : lda, aStep = args.transA ? lda : 1;
  const bStep = args.transB ? 1 : n, bCol = args.transB ? k : 1;
  for (let bi = 0; bi < batch; bi++) {
    const oa = bi * strideA, ob = bi * strideB, oc = bi * strideC;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0, ia = oa + i * aRow, ib = ob + j * bCol; p < k; p++, ia += aStep, ib += bStep) s += a[ia] * b[ib];
        let r = alpha * s + (bias ? bias[j] : 0);
        if (accumulate) r += c[oc + i * n + j];
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
