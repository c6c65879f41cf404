import { expect, it } from "vitest";
import { KernelArgumentError } from "../src/errors.js";
import { kernelSpecs } from "../src/kernels/index.js";
import { oracle } from "../src/oracle/index.js";
import { arr, callOracle, expectClose } from "./support/call-oracle.js";
import { kernel } from "./support/hand-kernel.js";

// copyStrided, conv1d and mixture-of-experts cases worked out by hand (the coverage check is in oracle-hand.test.ts).

kernel("copyStrided", () => {
  // batch 2, rows 2, cols 2; src rows (b, r) at 4b + 2r, dst rows at 5b + 2r with one gap element (index 4).
  const dims = { batch: 2, rows: 2, cols: 2, srcBatchStride: 4, srcRowStride: 2, dstBatchStride: 5, dstRowStride: 2 };
  const src = [1, 2, 3, 4, 5, 6, 7, 8];

  it("copies each (b, r) row to its dst row and leaves the gap alone", () => {
    const v = callOracle(oracle.copyStrided, dims, { src, dst: new Array(9).fill(-1) });
    expect(arr(v.dst)).toEqual([1, 2, 3, 4, -1, 5, 6, 7, 8]);
  });

  it("broadcasts with a src row stride of 0 and adds into dst when accumulating", () => {
    // Every head of a batch item gets that item's one row: [1, 2] then [5, 6].
    const v = callOracle(oracle.copyStrided, { ...dims, srcRowStride: 0, accumulate: true }, { src, dst: [10, 10, 20, 20, 0, 30, 30, 40, 40] });
    expect(arr(v.dst)).toEqual([11, 12, 21, 22, 0, 35, 36, 45, 46]);
  });

  it("swaps batch and rows when the dst strides nest rows outside batch", () => {
    // dst (r, b, c): batch stride 2, row stride 4.
    const v = callOracle(oracle.copyStrided, { ...dims, dstBatchStride: 2, dstRowStride: 4 }, { src, dst: new Array(8).fill(0) });
    expect(arr(v.dst)).toEqual([1, 2, 5, 6, 3, 4, 7, 8]);
  });

  it("refuses dst strides that put two elements on one, negative and fractional strides", () => {
    const check = (a: Record<string, unknown>) => () => kernelSpecs.copyStrided.check({ ...dims, ...a } as never);
    expect(check({})).not.toThrow();
    expect(check({ dstRowStride: 1 })).toThrow(KernelArgumentError);
    expect(check({ dstBatchStride: 3 })).toThrow(/land on one/);
    expect(check({ dstBatchStride: 0, dstRowStride: 0 })).toThrow(KernelArgumentError);
    expect(check({ batch: 1, dstBatchStride: 0 })).not.toThrow();
    expect(check({ srcBatchStride: -1 })).toThrow(/non-negative integer/);
    expect(check({ dstRowStride: 2.5 })).toThrow(KernelArgumentError);
  });
});

kernel("conv1dCausalForward", () => {
  // batch 1, seqLen 3, channels 2, K 2; x rows 3 apart (the third element of each row a gap, -9).
  // out[t, c] = bias[c] + w[c,0] x[t-1, c] + w[c,1] x[t, c]
  //   c0 (w 10, 1; bias 0.5):  0.5 + 1,  0.5 + 10 + 3,  0.5 + 30 + 5
  //   c1 (w -1, 2; bias -0.5): -0.5 + 4, -0.5 - 2 + 8,  -0.5 - 4 + 12
  const dims = { batch: 1, seqLen: 3, channels: 2, kernelSize: 2, rowStride: 3 };
  const x = [1, 2, -9, 3, 4, -9, 5, 6];
  const weight = [10, 1, -1, 2];

  it("convolves each channel over past times, zero before t = 0, reading x's rows rowStride apart", () => {
    const v = callOracle(oracle.conv1dCausalForward, dims, { x, weight, bias: [0.5, -0.5], out: new Array(6).fill(0) });
    expect(arr(v.out)).toEqual([1.5, 3.5, 13.5, 5.5, 35.5, 7.5]);
  });

  it("sees only the last taps of the window when seqLen < kernelSize", () => {
    // K 4, weights [1, 2, 3, 4]: out[0] = 4*5, out[1] = 3*5 + 4*7.
    const v = callOracle(oracle.conv1dCausalForward, { batch: 1, seqLen: 2, channels: 1, kernelSize: 4 }, { x: [5, 7], weight: [1, 2, 3, 4], out: [0, 0] });
    expect(arr(v.out)).toEqual([20, 43]);
  });

  it("refuses kernelSize 0 or above the maximum and a rowStride below channels", () => {
    const check = (a: Record<string, unknown>) => () => kernelSpecs.conv1dCausalForward.check({ ...dims, ...a } as never);
    expect(check({})).not.toThrow();
    expect(check({ kernelSize: 16 })).not.toThrow();
    expect(check({ kernelSize: 17 })).toThrow(/at most 16/);
    expect(check({ kernelSize: 0 })).toThrow(KernelArgumentError);
    expect(check({ rowStride: 1 })).toThrow(/rowStride must be >= channels/);
    expect(check({ seqLen: 2.5 })).toThrow(KernelArgumentError);
  });
});

kernel("conv1dCausalBackward", () => {
  // The forward's case above with dOut rows [1, 0], [0, 1], [2, -1]:
  //   dX[s, c] = w[c,1] dOut[s, c] + w[c,0] dOut[s+1, c]         (dense rows of 2)
  //   dWeight[c, 0] = sum_{t>=1} dOut[t, c] x[t-1, c],  dWeight[c, 1] = sum_t dOut[t, c] x[t, c]
  //     c0: [0*1 + 2*3, 1*1 + 0*3 + 2*5] = [6, 11];  c1: [1*2 - 1*4, 0*2 + 1*4 - 1*6] = [-2, -2]
  //   dBias = [3, 0]
  const dims = { batch: 1, seqLen: 3, channels: 2, kernelSize: 2, rowStride: 3 };
  const values = { dOut: [1, 0, 0, 1, 2, -1], x: [1, 2, -9, 3, 4, -9, 5, 6], weight: [10, 1, -1, 2] };

  it("overwrites dX and adds dWeight and dBias onto their contents", () => {
    const v = callOracle(oracle.conv1dCausalBackward, dims, { ...values, dX: new Array(6).fill(7), dWeight: [1, 1, 1, 1], dBias: [10, 10] });
    expect(arr(v.dX)).toEqual([1, -1, 20, 3, 2, -2]);
    expect(arr(v.dWeight)).toEqual([7, 12, -1, -1]);
    expect(arr(v.dBias)).toEqual([13, 10]);
  });

  it("leaves dBias out when absent", () => {
    const v = callOracle(oracle.conv1dCausalBackward, dims, { ...values, dX: new Array(6).fill(0), dWeight: [0, 0, 0, 0] });
    expect(arr(v.dWeight)).toEqual([6, 11, -2, -2]);
    expect(v.dBias).toBeUndefined();
  });
});

// Mixture-of-experts routing of 2 tokens over 3 experts, top 2. Logits are logs, so exp(logits) are integers:
//   token 0: exp = [1, 2, 3] -> probs [1/6, 2/6, 3/6], picks experts 2 then 1, weights 3/5 and 2/5
//   token 1: exp = [4, 1, 4] -> probs [4/9, 1/9, 4/9], a tie between 0 and 2: 0 first, weights 1/2, 1/2
//   counts [1, 1, 2] -> offsets [0, 1, 2, 4]; slots in token order within each expert: [2, 1, 0, 3]
const ROUTE_LOGITS = [0, Math.log(2), Math.log(3), Math.log(4), 0, Math.log(4)];
const route = (alpha: number) =>
  callOracle(oracle.moeRoute, { tokens: 2, numExperts: 3, topK: 2, alpha }, { logits: ROUTE_LOGITS, probs: new Array(6).fill(0), experts: [0, 0, 0, 0], weights: [0, 0, 0, 0], offsets: [0, 0, 0, 0], slots: [0, 0, 0, 0], auxLoss: [0] });

kernel("moeRoute", () => {
  it("picks the top 2 by logit (ties to the lower expert), renormalises their weights and lays out slots by expert", () => {
    const v = route(0.1);
    expectClose(v.probs, [1 / 6, 2 / 6, 3 / 6, 4 / 9, 1 / 9, 4 / 9]);
    expect(arr(v.experts)).toEqual([2, 1, 0, 2]);
    expectClose(v.weights, [3 / 5, 2 / 5, 1 / 2, 1 / 2]);
    expect(arr(v.offsets)).toEqual([0, 1, 2, 4]);
    expect(arr(v.slots)).toEqual([2, 1, 0, 3]);
  });

  it("computes the load-balancing loss alpha * E * sum_e f_e P_e", () => {
    // f = [1/4, 1/4, 2/4], P = [11/36, 8/36, 17/36]: sum = 53/144
    expectClose(route(0.1).auxLoss, [(0.1 * 3 * 53) / 144]);
    expect(arr(route(0).auxLoss)).toEqual([0]);
  });
});

kernel("moeRouteBackward", () => {
  const dims = { tokens: 2, numExperts: 3, topK: 2, alpha: 0.1 };
  const run = (dWeights: number[], auxScale: number) => {
    const f = route(0.1);
    return callOracle(oracle.moeRouteBackward, { ...dims, auxScale }, { dWeights, weights: f.weights, experts: f.experts, probs: f.probs, offsets: f.offsets, dLogits: new Array(6).fill(9) }).dLogits;
  };

  it("passes the weights' gradient through the softmax over the chosen experts only", () => {
    // token 0: w = [0.6, 0.4] on experts [2, 1], dW = [1, 0]: sum w dW = 0.6 -> dz2 = 0.6 * 0.4, dz1 = 0.4 * -0.6
    expectClose(run([1, 0, 0, 0], 0), [0, -0.24, 0.24, 0, 0, 0]);
  });

  it("adds the load-balancing loss's gradient through the full softmax", () => {
    // g_e = auxScale * alpha * E * f_e / T = 0.15 * [1/4, 1/4, 1/2]; token 0: probs [1/6, 1/3, 1/2], sum p g = 0.05625
    const t0 = [(1 / 6) * (0.0375 - 0.05625), (1 / 3) * (0.0375 - 0.05625), (1 / 2) * (0.075 - 0.05625)];
    // token 1: probs [4/9, 1/9, 4/9], sum p g = (4/9) 0.0375 + (1/9) 0.0375 + (4/9) 0.075 = 0.054166...
    const pg = (4 / 9) * 0.0375 + (1 / 9) * 0.0375 + (4 / 9) * 0.075;
    const t1 = [(4 / 9) * (0.0375 - pg), (1 / 9) * (0.0375 - pg), (4 / 9) * (0.075 - pg)];
    expectClose(run([0, 0, 0, 0], 1), [...t0, ...t1]);
  });
});

// Token movement: 2 tokens, 2 slots each, rows of 2; slots [2, 0, 1, 3].
const SLOTS = [2, 0, 1, 3];

kernel("moeDispatch", () => {
  const dims = { tokens: 2, topK: 2, dim: 2 };
  it("copies each token to its slots, scaled", () => {
    const v = callOracle(oracle.moeDispatch, dims, { x: [1, 2, 3, 4], slots: SLOTS, scale: [1, 2, 3, 4], out: new Array(8).fill(0) });
    expect(arr(v.out)).toEqual([2, 4, 9, 12, 1, 2, 12, 16]);
    const plain = callOracle(oracle.moeDispatch, dims, { x: [1, 2, 3, 4], slots: SLOTS, out: new Array(8).fill(0) });
    expect(arr(plain.out)).toEqual([1, 2, 3, 4, 1, 2, 3, 4]);
  });

  it("refuses a slot outside the T*k rows", () => {
    expect(() => callOracle(oracle.moeDispatch, dims, { x: [1, 2, 3, 4], slots: [0, 1, 2, 4], out: new Array(8).fill(0) })).toThrow(KernelArgumentError);
  });
});

kernel("moeCombine", () => {
  const dims = { tokens: 2, topK: 2, dim: 2 };
  const x = [1, 2, 3, 4, 5, 6, 7, 8];
  it("sums each token's slots, weighted, and accumulates when asked", () => {
    // token 0: 1 * x[2] + 2 * x[0]; token 1: 3 * x[1] + 4 * x[3]
    expect(arr(callOracle(oracle.moeCombine, dims, { x, slots: SLOTS, scale: [1, 2, 3, 4], out: [9, 9, 9, 9] }).out)).toEqual([7, 10, 37, 44]);
    expect(arr(callOracle(oracle.moeCombine, { ...dims, accumulate: true }, { x, slots: SLOTS, scale: [1, 2, 3, 4], out: [1, 1, 1, 1] }).out)).toEqual([8, 11, 38, 45]);
    expect(arr(callOracle(oracle.moeCombine, dims, { x, slots: SLOTS, out: [0, 0, 0, 0] }).out)).toEqual([6, 8, 10, 12]);
  });
});

kernel("moeCombineScaleGrad", () => {
  it("dots each token's output gradient with its slots' rows", () => {
    const v = callOracle(oracle.moeCombineScaleGrad, { tokens: 2, topK: 2, dim: 2 }, { dOut: [1, 0, 0, 1], x: [1, 2, 3, 4, 5, 6, 7, 8], slots: SLOTS, dScale: [0, 0, 0, 0] });
    expect(arr(v.dScale)).toEqual([5, 1, 4, 8]);
  });
});

// Grouped matmul: rows [[1,2],[3,4],[5,6]]; group 0 = row 0 with B0 = I, group 1 = rows 1-2 with B1 = [[1,1],[0,2]].
const GA = [1, 2, 3, 4, 5, 6];

kernel("groupedMatmul", () => {
  const dims = { rows: 3, n: 2, k: 2, groups: 2 };
  it("multiplies each row by its group's matrix, stored (k, n) or transposed (n, k)", () => {
    expect(arr(callOracle(oracle.groupedMatmul, dims, { a: GA, b: [1, 0, 0, 1, 1, 1, 0, 2], offsets: [0, 1, 3], c: new Array(6).fill(9) }).c)).toEqual([1, 2, 3, 11, 5, 17]);
    expect(arr(callOracle(oracle.groupedMatmul, { ...dims, transB: true }, { a: GA, b: [1, 0, 0, 1, 1, 0, 1, 2], offsets: [0, 1, 3], c: new Array(6).fill(9) }).c)).toEqual([1, 2, 3, 11, 5, 17]);
  });

  it("accumulates when asked, skips an empty group and refuses offsets that go back", () => {
    expect(arr(callOracle(oracle.groupedMatmul, { ...dims, accumulate: true }, { a: GA, b: [1, 0, 0, 1, 1, 1, 0, 2], offsets: [0, 0, 3], c: [1, 1, 1, 1, 1, 1] }).c)).toEqual([2, 6, 4, 12, 6, 18]);
    expect(() => callOracle(oracle.groupedMatmul, dims, { a: GA, b: new Array(8).fill(0), offsets: [0, 2, 1], c: new Array(6).fill(0) })).toThrow(KernelArgumentError);
  });
});

kernel("groupedMatmulWeightGrad", () => {
  const dims = { rows: 3, n: 2, k: 2, groups: 2 };
  it("accumulates each group's dC^T A into its (n, k) block", () => {
    // group 0: [1, 0]^T [1, 2]; group 1: [0, 1]^T [3, 4] + [1, 1]^T [5, 6]
    const v = callOracle(oracle.groupedMatmulWeightGrad, dims, { a: GA, dC: [1, 0, 0, 1, 1, 1], offsets: [0, 1, 3], dB: [0, 0, 0, 0, 1, 1, 1, 1] });
    expect(arr(v.dB)).toEqual([1, 2, 0, 0, 6, 7, 9, 11]);
  });

  it("leaves an empty group's block as it was", () => {
    const v = callOracle(oracle.groupedMatmulWeightGrad, dims, { a: GA, dC: [1, 0, 0, 1, 1, 1], offsets: [0, 0, 3], dB: [7, 7, 7, 7, 0, 0, 0, 0] });
    expect(arr(v.dB)).toEqual([7, 7, 7, 7, 6, 8, 8, 10]);
  });
});
