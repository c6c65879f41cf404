import { type Mamba3ScanBackwardArgs, type Mamba3ScanDims, type Mamba3ScanForwardArgs, mamba3Chunks, mamba3RowStrides } from "../kernels/mamba3.js";
import { sigmoid } from "./activation.js";
import { softplus } from "./ssd.js";
import type { OracleKernel } from "./types.js";

/** Index helpers for one (b, h) of the scan. */
function layout(a: Mamba3ScanDims) {
  const { seqLen, heads, headDim: P, groups, stateSize: N } = a;
  const s = mamba3RowStrides(a);
  const perGroup = heads / groups;
  const row = (b: number, t: number) => b * seqLen + t;
  return {
    P,
    N,
    K: N >> 1,
    xAt: (b: number, t: number, h: number) => row(b, t) * s.x + h * P,
    dtAt: (b: number, t: number, h: number) => row(b, t) * s.dt + h,
    lamAt: (b: number, t: number, h: number) => row(b, t) * heads + h,
    thetaAt: (b: number, t: number, h: number) => (row(b, t) * heads + h) * (N >> 1),
    bcAt: (b: number, t: number, h: number) => row(b, t) * s.bc + Math.floor(h / perGroup) * N,
    yAt: (b: number, t: number, h: number) => (row(b, t) * heads + h) * P,
  };
}

type Values = Record<string, Float64Array>;

/**
 * The forward quantities of one (b, h), every token: Δ, λ, α, β, γ, the turned rows B̄ and
 * C̄ (and the unturned B̂, Ĉ), the angles and the states S_t (S[t + 1]; S[0] = 0).
 */
function runRecurrence(a: Mamba3ScanDims, v: Values, b: number, h: number) {
  const L = layout(a);
  const { P, N, K } = L;
  const A = -Math.exp(v.aLog[h]);
  const rotates = v.theta !== undefined;
  const T = a.seqLen;
  const delta = new Float64Array(T), lam = new Float64Array(T), alpha = new Float64Array(T);
  const Bh: Float64Array[] = [], Ch: Float64Array[] = [], Bb: Float64Array[] = [], Cb: Float64Array[] = [], phi: Float64Array[] = [];
  const angle = new Float64Array(K);
  for (let t = 0; t < T; t++) {
    delta[t] = softplus(v.dt[L.dtAt(b, t, h)] + v.dtBias[h]);
    lam[t] = sigmoid(v.lambda[L.lamAt(b, t, h)]);
    alpha[t] = Math.exp(delta[t] * A);
    const bo = L.bcAt(b, t, h);
    const bh = new Float64Array(N), ch = new Float64Array(N);
    for (let n = 0; n < N; n++) {
      bh[n] = v.B[bo + n] + v.bBias[h * N + n];
      ch[n] = v.C[bo + n] + v.cBias[h * N + n];
    }
    Bh.push(bh);
    Ch.push(ch);
    if (rotates) for (let k = 0; k < K; k++) angle[k] += delta[t] * v.theta[L.thetaAt(b, t, h) + k];
    phi.push(angle.slice());
    Bb.push(rotates ? turn(bh, angle, 1) : bh);
    Cb.push(rotates ? turn(ch, angle, 1) : ch);
  }
  const S = [new Float64Array(P * N)];
  for (let t = 0; t < T; t++) {
    const next = new Float64Array(P * N);
    const g = lam[t] * delta[t];
    const be = (1 - lam[t]) * delta[t] * alpha[t];
    const xo = L.xAt(b, t, h);
    for (let p = 0; p < P; p++) {
      for (let n = 0; n < N; n++) {
        let s = alpha[t] * S[t][p * N + n] + g * v.x[xo + p] * Bb[t][n];
        if (t > 0) s += be * v.x[L.xAt(b, t - 1, h) + p] * Bb[t - 1][n];
        next[p * N + n] = s;
      }
    }
    S.push(next);
  }
  return { A, delta, lam, alpha, Bh, Ch, Bb, Cb, phi, S };
}

/** Pairs (2k, 2k+1) of u turned by sign·angle[k]. */
function turn(u: Float64Array, angle: Float64Array, sign: 1 | -1): Float64Array {
  const out = new Float64Array(u.length);
  for (let k = 0; k < angle.length; k++) {
    const c = Math.cos(angle[k]), s = sign * Math.sin(angle[k]);
    out[2 * k] = u[2 * k] * c - u[2 * k + 1] * s;
    out[2 * k + 1] = u[2 * k] * s + u[2 * k + 1] * c;
  }
  return out;
}

/** y from the sequential recurrence; states G_{cQ-1} = S_{cQ-1} + μ_{cQ-1} x_{cQ-1} B̄_{cQ-1}^T entering each chunk c. */
export const mamba3ScanForwardOracle: OracleKernel<Mamba3ScanForwardArgs> = (a, v) => {
  const L = layout(a);
  const { P, N } = L;
  const chunks = mamba3Chunks(a);
  for (let b = 0; b < a.batch; b++) {
    for (let h = 0; h < a.heads; h++) {
      const r = runRecurrence(a, v, b, h);
      for (let c = 1; c < chunks; c++) {
        const t = c * a.chunkSize - 1;
        const mu = (1 - r.lam[t + 1]) * r.delta[t + 1];
        const xo = L.xAt(b, t, h), at = ((b * a.heads + h) * chunks + c) * P * N;
        for (let p = 0; p < P; p++) for (let n = 0; n < N; n++) v.states[at + p * N + n] = r.S[t + 1][p * N + n] + mu * v.x[xo + p] * r.Bb[t][n];
      }
      v.states.fill(0, ((b * a.heads + h) * chunks) * P * N, ((b * a.heads + h) * chunks + 1) * P * N);
      for (let t = 0; t < a.seqLen; t++) {
        const xo = L.xAt(b, t, h), yo = L.yAt(b, t, h);
        for (let p = 0; p < L.P; p++) {
          let s = v.D[h] * v.x[xo + p];
          for (let n = 0; n < L.N; n++) s += r.S[t + 1][p * L.N + n] * r.Cb[t][n];
          v.y[yo + p] = s;
        }
      }
    }
  }
};

/** d(angle) of a pair turned to `turned` with adjoint `d`: -d_re·im' + d_im·re'. */
const dAngle = (d: Float64Array, turned: Float64Array, k: number) => -d[2 * k] * turned[2 * k + 1] + d[2 * k + 1] * turned[2 * k];

/**
 * Reverse-mode through the recurrence: dS_t = α_{t+1} dS_{t+1} + dy_t C̄_t^T, then per token
 * the adjoints of x, B̄, C̄, α, β, γ; through the rotation (angles summed backwards over time)
 * and the biases to the raw inputs and parameters.
 */
export const mamba3ScanBackwardOracle: OracleKernel<Mamba3ScanBackwardArgs> = (a, v) => {
  const L = layout(a);
  const { P, N, K } = L;
  const T = a.seqLen;
  const s = mamba3RowStrides(a);
  const rows = a.batch * T;
  for (let r = 0; r < rows; r++) {
    v.dX.fill(0, r * s.x, r * s.x + a.heads * P);
    v.dDt.fill(0, r * s.dt, r * s.dt + a.heads);
    v.dB.fill(0, r * s.bc, r * s.bc + a.groups * N);
    v.dC.fill(0, r * s.bc, r * s.bc + a.groups * N);
  }
  const rotates = v.theta !== undefined;
  for (let b = 0; b < a.batch; b++) {
    for (let h = 0; h < a.heads; h++) {
      const r = runRecurrence(a, v, b, h);
      const { A, delta, lam, alpha } = r;
      const dS: Float64Array[] = new Array(T);
      let carried = new Float64Array(P * N);
      for (let t = T - 1; t >= 0; t--) {
        const yo = L.yAt(b, t, h);
        const g = new Float64Array(P * N);
        for (let p = 0; p < P; p++) for (let n = 0; n < N; n++) g[p * N + n] = carried[p * N + n] + v.dY[yo + p] * r.Cb[t][n];
        dS[t] = g;
        carried = g.map((e) => e * alpha[t]);
      }
      const dDelta = new Float64Array(T), dLam = new Float64Array(T);
      const dBb: Float64Array[] = [], dCb: Float64Array[] = [];
      let dA = 0;
      for (let t = 0; t < T; t++) {
        const xo = L.xAt(b, t, h), yo = L.yAt(b, t, h);
        const gam = lam[t] * delta[t];
        const betNext = t + 1 < T ? (1 - lam[t + 1]) * delta[t + 1] * alpha[t + 1] : 0;
        const dbb = new Float64Array(N), dcb = new Float64Array(N);
        let dAlpha = 0, dBeta = 0, dGamma = 0, dDpart = 0;
        for (let p = 0; p < P; p++) {
          const x = v.x[xo + p];
          const xPrev = t > 0 ? v.x[L.xAt(b, t - 1, h) + p] : 0;
          let dx = v.D[h] * v.dY[yo + p];
          for (let n = 0; n < N; n++) {
            const gd = dS[t][p * N + n];
            const gNext = t + 1 < T ? dS[t + 1][p * N + n] : 0;
            dx += gam * gd * r.Bb[t][n] + betNext * gNext * r.Bb[t][n];
            dbb[n] += gam * gd * x + betNext * gNext * x;
            dcb[n] += r.S[t + 1][p * N + n] * v.dY[yo + p];
            dAlpha += gd * r.S[t][p * N + n];
            dGamma += gd * x * r.Bb[t][n];
            if (t > 0) dBeta += gd * xPrev * r.Bb[t - 1][n];
          }
          v.dX[xo + p] = dx;
          dDpart += v.dY[yo + p] * x;
        }
        dBb.push(dbb);
        dCb.push(dcb);
        // α = exp(ΔA), β = (1-λ)Δα, γ = λΔ
        dDelta[t] += dAlpha * alpha[t] * A + dBeta * (1 - lam[t]) * (alpha[t] + delta[t] * alpha[t] * A) + dGamma * lam[t];
        dLam[t] += -dBeta * delta[t] * alpha[t] + dGamma * delta[t];
        dA += dAlpha * alpha[t] * delta[t] + dBeta * (1 - lam[t]) * delta[t] * alpha[t] * delta[t];
        v.dD[h] += dDpart;
      }
      // Through the rotation: φ_t = Σ_{r<=t} Δ_r θ_r, so each θ_r and Δ_r see the angle adjoints of t >= r.
      const suffix = new Float64Array(K);
      const dBh: Float64Array[] = new Array(T), dCh: Float64Array[] = new Array(T);
      for (let t = T - 1; t >= 0; t--) {
        if (!rotates) {
          dBh[t] = dBb[t];
          dCh[t] = dCb[t];
          continue;
        }
        const to = L.thetaAt(b, t, h);
        let dDeltaRot = 0;
        for (let k = 0; k < K; k++) {
          suffix[k] += dAngle(dBb[t], r.Bb[t], k) + dAngle(dCb[t], r.Cb[t], k);
          v.dTheta![to + k] = delta[t] * suffix[k];
          dDeltaRot += v.theta![to + k] * suffix[k];
        }
        dDelta[t] += dDeltaRot;
        dBh[t] = turn(dBb[t], r.phi[t], -1);
        dCh[t] = turn(dCb[t], r.phi[t], -1);
      }
      for (let t = 0; t < T; t++) {
        const bo = L.bcAt(b, t, h);
        for (let n = 0; n < N; n++) {
          v.dB[bo + n] += dBh[t][n];
          v.dC[bo + n] += dCh[t][n];
          v.dBBias[h * N + n] += dBh[t][n];
          v.dCBias[h * N + n] += dCh[t][n];
        }
        const raw = v.dt[L.dtAt(b, t, h)] + v.dtBias[h];
        const dRaw = dDelta[t] * sigmoid(raw);
        v.dDt[L.dtAt(b, t, h)] = dRaw;
        v.dDtBias[h] += dRaw;
        v.dLambda[L.lamAt(b, t, h)] = dLam[t] * lam[t] * (1 - lam[t]);
      }
      v.dALog[h] += dA * A; // dA/daLog = A
    }
  }
};
