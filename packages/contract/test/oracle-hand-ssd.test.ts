import { expect, it } from "vitest";
import { KernelArgumentError } from "../src/errors.js";
import { kernelSpecs } from "../src/kernels/index.js";
import { oracle } from "../src/oracle/index.js";
import { arr, callOracle, expectClose } from "./support/call-oracle.js";
import { kernel } from "./support/hand-kernel.js";

// Mamba2's SSD scan worked out by hand (the coverage check is in oracle-hand.test.ts).
// One head, headDim 1, stateSize 1, two tokens: aLog 0 (A = -1) and dtRaw + dtBias = 0,
// so dt = softplus(0) = ln 2 and each step's decay is exp(-ln 2) = 1/2; D = 1/2.
//   S0 = ln2·x0·B0 = 2 ln2,          y0 = S0·C0 + D·x0 = 10 ln2 + 1
//   S1 = S0/2 + ln2·x1·B1 = 13 ln2,  y1 = S1·C1 + D·x1 = 91 ln2 + 2
const LN2 = Math.LN2;
const dims = { batch: 1, seqLen: 2, heads: 1, headDim: 1, groups: 1, stateSize: 1 };
const inputs = { x: [2, 4], dt: [0.25, 0.25], dtBias: [-0.25], aLog: [0], B: [1, 3], C: [5, 7], D: [0.5] };

kernel("ssdScanForward", () => {
  it("runs the recurrence and saves the state entering each chunk", () => {
    const one = callOracle(oracle.ssdScanForward, { ...dims, chunkSize: 1 }, { ...inputs, y: [0, 0], states: [9, 9] });
    expectClose(arr(one.y), [10 * LN2 + 1, 91 * LN2 + 2]);
    expectClose(arr(one.states), [0, 2 * LN2]);
    const whole = callOracle(oracle.ssdScanForward, { ...dims, chunkSize: 2 }, { ...inputs, y: [0, 0], states: [9] });
    expectClose(arr(whole.y), [10 * LN2 + 1, 91 * LN2 + 2]);
    expect(arr(whole.states)).toEqual([0]);
  });

  it("refuses heads that groups do not divide and strides narrower than a row", () => {
    const check = (a: Record<string, unknown>) => () => kernelSpecs.ssdScanForward.check({ ...dims, chunkSize: 1, ...a } as never);
    expect(check({})).not.toThrow();
    expect(check({ heads: 3, groups: 2 })).toThrow(/multiple of groups/);
    expect(check({ xRowStride: 0 })).toThrow(KernelArgumentError);
    expect(check({ heads: 2, dtRowStride: 1 })).toThrow(/dtRowStride/);
    expect(check({ stateSize: 257 })).toThrow(/stateSize/);
  });
});

kernel("ssdScanBackward", () => {
  // dY = 1 at both tokens. Backwards: dH1 = dy1·C1 = 7, dH0 = dH1/2 + dy0·C0 = 8.5.
  //   dX_t = dt·dH_t·B_t + D·dy_t: 8.5 ln2 + 1/2, 21 ln2 + 1/2;  dB_t = dt·dH_t·x_t: 17 ln2, 28 ln2
  //   dC_t = S_t·dy_t: 2 ln2, 13 ln2;  dD = x0 + x1 = 6
  //   d dt_1 = dH1·x1·B1 + dH1·S0·decay·A = 84 − 7 ln2, d dt_0 = dH0·x0·B0 = 17 (S_{-1} = 0);
  //   softplus'(0) = 1/2 halves both for dDt, whose sum is dDtBias: 50.5 − 3.5 ln2
  //   dALog = dH1·S0·decay·dt·A = −7 ln²2
  it("gives every gradient, accumulating the per-head ones", () => {
    const v = callOracle(
      oracle.ssdScanBackward,
      { ...dims, chunkSize: 1 },
      { ...inputs, dY: [1, 1], states: [0, 2 * LN2], dX: [0, 0], dDt: [0, 0], dB: [0, 0], dC: [0, 0], dDtBias: [1], dALog: [1], dD: [1] },
    );
    expectClose(arr(v.dX), [8.5 * LN2 + 0.5, 21 * LN2 + 0.5]);
    expectClose(arr(v.dB), [17 * LN2, 28 * LN2]);
    expectClose(arr(v.dC), [2 * LN2, 13 * LN2]);
    expectClose(arr(v.dDt), [8.5, 42 - 3.5 * LN2]);
    expectClose(arr(v.dDtBias), [1 + 50.5 - 3.5 * LN2]);
    expectClose(arr(v.dALog), [1 - 7 * LN2 * LN2]);
    expectClose(arr(v.dD), [1 + 6]);
  });
});
