import { describe, expect, it } from "vitest";
import { oracle } from "../src/oracle/index.js";
import { dotAt, expectAccumulated, expectGradient, forwardKernel, gappedRows, rng, uniform } from "./support/finite-difference.js";

// Mamba3's scan: the backward oracle against central finite differences of the forward
// oracle, in f64 (the coverage check is in finite-difference.test.ts).

const PARAMS = ["dBBias", "dCBias", "dDtBias", "dALog", "dD"] as const;

forwardKernel("mamba3ScanForward", () => {
  const cases = [
    { name: "rotation, 2 heads per group, short last chunk", rope: true, dims: { batch: 2, seqLen: 5, heads: 2, headDim: 3, groups: 1, stateSize: 4, chunkSize: 2 } },
    { name: "no rotation, conv layout: x, B, C slices of one row, dt of another", rope: false, dims: { batch: 1, seqLen: 4, heads: 2, headDim: 2, groups: 2, stateSize: 3, chunkSize: 3, xRowStride: 17, bcRowStride: 17, dtRowStride: 3 } },
  ];
  for (const { name, rope, dims: c } of cases) {
    describe(name, () => {
      const rand = rng(rope ? 93 : 94);
      const rows = c.batch * c.seqLen, P = c.headDim, N = c.stateSize, H = c.heads;
      const xs = c.xRowStride ?? H * P, bs = c.bcRowStride ?? c.groups * N, ds = c.dtRowStride ?? H;
      const gapped = (width: number, stride: number, lo = -1, hi = 1) => gappedRows(rand, rows, width, stride, lo, hi);
      const x = gapped(H * P, xs), B = gapped(c.groups * N, bs), C = gapped(c.groups * N, bs), dt = gapped(H, ds, -2, 1);
      const lambda = uniform(rand, rows * H, -3, 3), theta = uniform(rand, (rows * H * N) / 2);
      const bBias = uniform(rand, H * N), cBias = uniform(rand, H * N), dtBias = uniform(rand, H), aLog = uniform(rand, H), D = uniform(rand, H);
      const R = uniform(rand, rows * H * P);
      const states = () => new Float64Array(c.batch * H * Math.ceil(c.seqLen / c.chunkSize) * P * N);
      const inputs = () => ({ x: x.v, dt: dt.v, lambda, ...(rope ? { theta } : {}), B: B.v, C: C.v, bBias, cBias, dtBias, aLog, D, states: states() });
      const run = (kernel: (a: never, v: never) => void, v: Record<string, Float64Array>) => {
        kernel({ ...c, dtype: "f32" } as never, v as never);
        return v;
      };
      const loss = () => dotAt(run(oracle.mamba3ScanForward, { ...inputs(), y: new Float64Array(rows * H * P) }).y, R);
      const fresh = (like: Float64Array) => like.map(() => 12345);
      const grads = (start: Record<(typeof PARAMS)[number], Float64Array>) => {
        const v: Record<string, Float64Array> = {
          ...inputs(),
          dY: R,
          dX: fresh(x.v),
          dDt: fresh(dt.v),
          dLambda: fresh(lambda),
          ...(rope ? { dTheta: fresh(theta) } : {}),
          dB: fresh(B.v),
          dC: fresh(C.v),
          ...start,
        };
        run(oracle.mamba3ScanForward, { ...v, y: new Float64Array(rows * H * P) });
        return run(oracle.mamba3ScanBackward, v);
      };
      const zeros = () => ({ dBBias: new Float64Array(H * N), dCBias: new Float64Array(H * N), dDtBias: new Float64Array(H), dALog: new Float64Array(H), dD: new Float64Array(H) });
      const g = grads(zeros());

      it("dX, dDt, dLambda, dB, dC (and dTheta) match finite differences, laid out like their inputs, gaps untouched", () => {
        expectGradient("dX", x.v, g.dX, loss, x.logical);
        expectGradient("dDt", dt.v, g.dDt, loss, dt.logical);
        expectGradient("dLambda", lambda, g.dLambda, loss);
        expectGradient("dB", B.v, g.dB, loss, B.logical);
        expectGradient("dC", C.v, g.dC, loss, C.logical);
        if (rope) expectGradient("dTheta", theta, g.dTheta, loss);
        for (const [key, m] of [["dX", x], ["dDt", dt], ["dB", B], ["dC", C]] as const) {
          const logical = new Set(m.logical);
          expect([...g[key].keys()].filter((i) => !logical.has(i) && g[key][i] !== 12345), `${key} gaps written`).toEqual([]);
        }
      });

      it("the parameter gradients match finite differences and accumulate", () => {
        const params = { dBBias: bBias, dCBias: cBias, dDtBias: dtBias, dALog: aLog, dD: D };
        for (const k of PARAMS) expectGradient(k, params[k], g[k], loss);
        const start = { dBBias: uniform(rand, H * N), dCBias: uniform(rand, H * N), dDtBias: uniform(rand, H), dALog: uniform(rand, H), dD: uniform(rand, H) };
        const again = grads(Object.fromEntries(PARAMS.map((k) => [k, start[k].slice()])) as typeof start);
        for (const k of PARAMS) expectAccumulated(again[k], start[k], g[k]);
      });
    });
  }
});
