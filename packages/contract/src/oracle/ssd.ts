import { type SsdScanBackwardArgs, type SsdScanDims, type SsdScanForwardArgs, ssdChunks, ssdRowStrides } from "../kernels/ssd.js";
import { sigmoid } from "./activation.js";
import type { OracleKernel } from "./types.js";

/** PyTorch's softplus (beta 1, threshold 20). */
export const softplus = (v: number): number => (v > 20 ? v : Math.log1p(Math.exp(v)));

/** Index helpers for one (b, h) of the scan. */
function layout(a: SsdScanDims) {
  const { seqLen, heads, headDim: P, groups, stateSize: N } = a;
  const s = ssdRowStrides(a);
  const perGroup = heads / groups;
  return {
    P,
    N,
    xAt: (b: number, t: number, h: number) => (b * seqLen + t) * s.x + h * P,
    dtAt: (b: number, t: number, h: number) => (b * seqLen + t) * s.dt + h,
    bcAt: (b: number, t: number, h: number) => (b * seqLen + t) * s.bc + Math.floor(h / perGroup) * N,
    yAt: (b: number, t: number, h: number) => ((b * seqLen + t) * heads + h) * P,
    stateAt: (b: number, h: number, c: number) => ((b * heads + h) * ssdChunks(a) + c) * P * N,
  };
}

type ScanValues = Record<"x" | "dt" | "dtBias" | "aLog" | "B" | "C", Float64Array>;

/** The recurrence of one (b, h): every state S_t (t = −1..seqLen−1, S_{−1} = 0) and every dt_t. */
function runRecurrence(a: SsdScanDims, v: ScanValues, b: number, h: number) {
  const L = layout(a);
  const A = -Math.exp(v.aLog[h]);
  const S = [new Float64Array(L.P * L.N)];
  const dts: number[] = [];
  for (let t = 0; t < a.seqLen; t++) {
    const dt = softplus(v.dt[L.dtAt(b, t, h)] + v.dtBias[h]);
    const decay = Math.exp(dt * A);
    const prev = S[t], next = new Float64Array(L.P * L.N);
    const xo = L.xAt(b, t, h), bo = L.bcAt(b, t, h);
    for (let p = 0; p < L.P; p++) for (let n = 0; n < L.N; n++) next[p * L.N + n] = decay * prev[p * L.N + n] + dt * v.x[xo + p] * v.B[bo + n];
    S.push(next);
    dts.push(dt);
  }
  return { A, S, dts };
}

/** y and the chunk-entry states from the sequential recurrence. */
export const ssdScanForwardOracle: OracleKernel<SsdScanForwardArgs> = (a, v) => {
  const L = layout(a);
  for (let b = 0; b < a.batch; b++) {
    for (let h = 0; h < a.heads; h++) {
      const { S } = runRecurrence(a, v as unknown as ScanValues, b, h);
      for (let c = 0; c < ssdChunks(a); c++) v.states.set(S[c * a.chunkSize], L.stateAt(b, h, c));
      for (let t = 0; t < a.seqLen; t++) {
        const xo = L.xAt(b, t, h), co = L.bcAt(b, t, h), yo = L.yAt(b, t, h);
        for (let p = 0; p < L.P; p++) {
          let s = v.D[h] * v.x[xo + p];
          for (let n = 0; n < L.N; n++) s += S[t + 1][p * L.N + n] * v.C[co + n];
          v.y[yo + p] = s;
        }
      }
    }
  }
};

/** Reverse-mode through the recurrence (dH_t = exp(dt_{t+1} A) dH_{t+1} + dy_t C_t^T). */
export const ssdScanBackwardOracle: OracleKernel<SsdScanBackwardArgs> = (a, v) => {
  const L = layout(a);
  const { P, N } = L;
  const clearRows = (key: "dX" | "dDt" | "dB" | "dC", width: number, at: (b: number, t: number) => number) => {
    for (let b = 0; b < a.batch; b++) for (let t = 0; t < a.seqLen; t++) v[key].fill(0, at(b, t), at(b, t) + width);
  };
  clearRows("dX", a.heads * P, (b, t) => L.xAt(b, t, 0));
  clearRows("dDt", a.heads, (b, t) => L.dtAt(b, t, 0));
  clearRows("dB", a.groups * N, (b, t) => L.bcAt(b, t, 0));
  clearRows("dC", a.groups * N, (b, t) => L.bcAt(b, t, 0));
  for (let b = 0; b < a.batch; b++) {
    for (let h = 0; h < a.heads; h++) {
      const { A, S, dts } = runRecurrence(a, v as unknown as ScanValues, b, h);
      let carried = new Float64Array(P * N); // exp(dt_{t+1} A) dH_{t+1}
      for (let t = a.seqLen - 1; t >= 0; t--) {
        const xo = L.xAt(b, t, h), bo = L.bcAt(b, t, h), yo = L.yAt(b, t, h), dto = L.dtAt(b, t, h);
        const dt = dts[t], decay = Math.exp(dt * A);
        const dH = new Float64Array(P * N);
        for (let p = 0; p < P; p++) for (let n = 0; n < N; n++) dH[p * N + n] = carried[p * N + n] + v.dY[yo + p] * v.C[bo + n];
        let dtDirect = 0, dDecay = 0, dDpart = 0;
        for (let p = 0; p < P; p++) {
          let dxs = 0;
          for (let n = 0; n < N; n++) {
            const g = dH[p * N + n];
            dxs += g * v.B[bo + n];
            dtDirect += g * v.x[xo + p] * v.B[bo + n];
            dDecay += g * S[t][p * N + n];
            v.dB[bo + n] += dt * g * v.x[xo + p];
            v.dC[bo + n] += S[t + 1][p * N + n] * v.dY[yo + p];
          }
          v.dX[xo + p] = dt * dxs + v.D[h] * v.dY[yo + p];
          dDpart += v.dY[yo + p] * v.x[xo + p];
        }
        const dDt = dtDirect + dDecay * decay * A;
        const dRaw = dDt * sigmoid(v.dt[dto] + v.dtBias[h]);
        v.dDt[dto] = dRaw;
        v.dDtBias[h] += dRaw;
        v.dALog[h] += dDecay * decay * dt * A; // dA/daLog = A
        v.dD[h] += dDpart;
        carried = dH.map((g) => g * decay);
      }
    }
  }
};
