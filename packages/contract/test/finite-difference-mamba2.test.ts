import { describe, expect, it } from "vitest";
import { oracle } from "../src/oracle/index.js";
import { type Values, call, dotAt, expectAccumulated, expectGradient, forwardKernel, gappedRows, rng, stridedIndices, uniform } from "./support/finite-difference.js";

// Mamba2's kernels (causal convolution, SSD scan): backward oracles against central finite
// differences of their forward oracles, in f64 (the coverage check is in finite-difference.test.ts).

forwardKernel("conv1dCausalForward", () => {
  const cases = [
    { name: "K 4, batch 2, with bias", batch: 2, seqLen: 6, channels: 3, kernelSize: 4, bias: true },
    { name: "K 3 > seqLen, x a strided slice, no bias", batch: 1, seqLen: 2, channels: 2, kernelSize: 3, rowStride: 5, bias: false },
  ];
  for (const c of cases) {
    describe(c.name, () => {
      const { name: _name, bias: withBias, ...dims } = c;
      const rand = rng(withBias ? 81 : 82);
      const rows = c.batch * c.seqLen, C = c.channels, K = c.kernelSize;
      const stride = c.rowStride ?? C;
      const logical = stridedIndices(rows, C, stride);
      const isLogical = new Set(logical);
      const x = uniform(rand, (rows - 1) * stride + C).map((v, i) => (isLogical.has(i) ? v : NaN)); // gaps must not be read
      const weight = uniform(rand, C * K);
      const bias = uniform(rand, C);
      const R = uniform(rand, rows * C);
      const loss = () => {
        const v: Values = { x, weight, out: new Float64Array(rows * C) };
        if (withBias) v.bias = bias;
        return dotAt(call(oracle.conv1dCausalForward, dims, v).out, R);
      };
      const backward = (dWeight: Float64Array, dBias: Float64Array) => {
        const v: Values = { dOut: R, x, weight, dX: new Float64Array(rows * C).fill(12345), dWeight };
        if (withBias) v.dBias = dBias;
        return call(oracle.conv1dCausalBackward, dims, v);
      };
      const g = backward(new Float64Array(C * K), new Float64Array(C));

      it("dX (dense) matches finite differences of x's logical elements", () => {
        const dXAtX = new Float64Array(x.length);
        logical.forEach((xi, i) => (dXAtX[xi] = g.dX[i]));
        expectGradient("dX", x, dXAtX, loss, logical);
      });

      it("dWeight matches finite differences and accumulates", () => {
        expectGradient("dWeight", weight, g.dWeight, loss);
        const start = uniform(rand, C * K);
        expectAccumulated(backward(start.slice(), new Float64Array(C)).dWeight, start, g.dWeight);
      });

      if (withBias) {
        it("dBias matches finite differences and accumulates", () => {
          expectGradient("dBias", bias, g.dBias, loss);
          const start = uniform(rand, C);
          expectAccumulated(backward(new Float64Array(C * K), start.slice()).dBias, start, g.dBias);
        });
      }
    });
  }
});

forwardKernel("ssdScanForward", () => {
  const cases = [
    { name: "2 heads per group, short last chunk", batch: 2, seqLen: 5, heads: 2, headDim: 3, groups: 1, stateSize: 2, chunkSize: 2 },
    { name: "Mamba2 layout: x, B, C slices of one row, dt of another", batch: 1, seqLen: 4, heads: 2, headDim: 2, groups: 2, stateSize: 3, chunkSize: 3, xRowStride: 17, bcRowStride: 17, dtRowStride: 3 },
  ];
  for (const c of cases) {
    describe(c.name, () => {
      const { name: _name, ...dims } = c;
      const rand = rng(91);
      const rows = c.batch * c.seqLen, P = c.headDim, N = c.stateSize, H = c.heads;
      const xs = c.xRowStride ?? H * P, bs = c.bcRowStride ?? c.groups * N, ds = c.dtRowStride ?? H;
      const gapped = (width: number, stride: number, lo = -1, hi = 1) => gappedRows(rand, rows, width, stride, lo, hi);
      const x = gapped(H * P, xs), B = gapped(c.groups * N, bs), C = gapped(c.groups * N, bs), dt = gapped(H, ds, -2, 1);
      const dtBias = uniform(rand, H), aLog = uniform(rand, H), D = uniform(rand, H);
      const R = uniform(rand, rows * H * P);
      const states = () => new Float64Array(c.batch * H * Math.ceil(c.seqLen / c.chunkSize) * P * N);
      const inputs = () => ({ x: x.v, dt: dt.v, dtBias, aLog, B: B.v, C: C.v, D, states: states() });
      const loss = () => dotAt(call(oracle.ssdScanForward, dims, { ...inputs(), y: new Float64Array(rows * H * P) }).y, R);
      const grads = (start: Record<"dDtBias" | "dALog" | "dD", Float64Array>) => {
        const v = { ...inputs(), dY: R, dX: x.v.map(() => 12345), dDt: dt.v.map(() => 12345), dB: B.v.map(() => 12345), dC: C.v.map(() => 12345), ...start };
        call(oracle.ssdScanForward, dims, { ...v, y: new Float64Array(rows * H * P) });
        return call(oracle.ssdScanBackward, dims, v);
      };
      const zeros = () => ({ dDtBias: new Float64Array(H), dALog: new Float64Array(H), dD: new Float64Array(H) });
      const g = grads(zeros());

      it("dX, dDt, dB, dC match finite differences, laid out like their inputs, gaps untouched", () => {
        expectGradient("dX", x.v, g.dX, loss, x.logical);
        expectGradient("dDt", dt.v, g.dDt, loss, dt.logical);
        expectGradient("dB", B.v, g.dB, loss, B.logical);
        expectGradient("dC", C.v, g.dC, loss, C.logical);
        for (const [key, m] of [["dX", x], ["dDt", dt], ["dB", B], ["dC", C]] as const) {
          const logical = new Set(m.logical);
          expect([...g[key].keys()].filter((i) => !logical.has(i) && g[key][i] !== 12345), `${key} gaps written`).toEqual([]);
        }
      });

      it("dDtBias, dALog, dD match finite differences and accumulate", () => {
        expectGradient("dDtBias", dtBias, g.dDtBias, loss);
        expectGradient("dALog", aLog, g.dALog, loss);
        expectGradient("dD", D, g.dD, loss);
        const start = { dDtBias: uniform(rand, H), dALog: uniform(rand, H), dD: uniform(rand, H) };
        const again = grads({ dDtBias: start.dDtBias.slice(), dALog: start.dALog.slice(), dD: start.dD.slice() });
        for (const k of ["dDtBias", "dALog", "dD"] as const) expectAccumulated(again[k], start[k], g[k]);
      });
    });
  }
});
