import type { LayerNormBackwardArgs, LayerNormForwardArgs, RmsNormBackwardArgs, RmsNormForwardArgs } from "../kernels/norm.js";
import type { FloatDType } from "../dtype.js";
import { decodeElements, encodeToBytes } from "../host-codec.js";
import type { OracleKernel } from "./types.js";

/** The rows a norm forward normalizes: x, or with a residual x + residual rounded to the dtype (written to sum too). */
function normInput(dtype: FloatDType, v: Record<string, Float64Array>): Float64Array {
  if (!v.residual) return v.x;
  const raw = v.x.map((x, i) => x + v.residual[i]);
  v.sum.set(decodeElements(encodeToBytes(raw, dtype), dtype, raw.length));
  return v.sum;
}

export const layerNormForwardOracle: OracleKernel<LayerNormForwardArgs> = (a, v) => {
  const { rows, dim } = a;
  const x = normInput(a.dtype, v);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let mean = 0;
    for (let j = 0; j < dim; j++) mean += x[o + j];
    mean /= dim;
    let variance = 0;
    for (let j = 0; j < dim; j++) variance += (x[o + j] - mean) ** 2;
    variance /= dim;
    const rstd = 1 / Math.sqrt(variance + a.eps);
    for (let j = 0; j < dim; j++) {
      v.out[o + j] = (x[o + j] - mean) * rstd * v.weight[j] + (v.bias ? v.bias[j] : 0);
    }
    v.mean[r] = mean;
    v.rstd[r] = rstd;
  }
};

export const layerNormBackwardOracle: OracleKernel<LayerNormBackwardArgs> = (a, v) => {
  const { rows, dim } = a;
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    const mean = v.mean[r], rstd = v.rstd[r];
    let gMean = 0, gxMean = 0;
    for (let j = 0; j < dim; j++) {
      const xhat = (v.x[o + j] - mean) * rstd;
      const g = v.dOut[o + j] * v.weight[j];
      gMean += g;
      gxMean += g * xhat;
    }
    gMean /= dim;
    gxMean /= dim;
    for (let j = 0; j < dim; j++) {
      const xhat = (v.x[o + j] - mean) * rstd;
      const g = v.dOut[o + j] * v.weight[j];
      v.dX[o + j] = (v.dResidual ? v.dResidual[o + j] : 0) + rstd * (g - gMean - xhat * gxMean);
      if (v.dXColSums) v.dXColSums[j] += v.dX[o + j];
      v.dWeight[j] += v.dOut[o + j] * xhat;
      if (v.dBias) v.dBias[j] += v.dOut[o + j];
    }
  }
};

export const rmsNormForwardOracle: OracleKernel<RmsNormForwardArgs> = (a, v) => {
  const { rows, dim } = a;
  const x = normInput(a.dtype, v);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let ms = 0;
    for (let j = 0; j < dim; j++) ms += x[o + j] ** 2;
    const rstd = 1 / Math.sqrt(ms / dim + a.eps);
    for (let j = 0; j < dim; j++) v.out[o + j] = x[o + j] * rstd * (v.weight[j] + (a.weightOffset ?? 0));
    v.rstd[r] = rstd;
  }
};

export const rmsNormBackwardOracle: OracleKernel<RmsNormBackwardArgs> = (a, v) => {
  const { rows, dim } = a;
  const w = (j: number) => v.weight[j] + (a.weightOffset ?? 0);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    const rstd = v.rstd[r];
    let gxMean = 0;
    for (let j = 0; j < dim; j++) gxMean += v.dOut[o + j] * w(j) * v.x[o + j] * rstd;
    gxMean /= dim;
    for (let j = 0; j < dim; j++) {
      const xhat = v.x[o + j] * rstd;
      v.dX[o + j] = (v.dResidual ? v.dResidual[o + j] : 0) + rstd * (v.dOut[o + j] * w(j) - xhat * gxMean);
      if (v.dXColSums) v.dXColSums[j] += v.dX[o + j];
      v.dWeight[j] += v.dOut[o + j] * xhat;
    }
  }
};
