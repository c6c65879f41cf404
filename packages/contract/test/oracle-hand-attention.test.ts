import { expect, it } from "vitest";
import { oracle } from "../src/oracle/index.js";
import { arr, callOracle, expectClose } from "./support/call-oracle.js";
import { kernel } from "./support/hand-kernel.js";

// Attention cases worked out by hand (the coverage check is in oracle-hand.test.ts).

kernel("attentionForward", () => {
  it("returns v when seqLen is 1, with lse = scale * q.k", () => {
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 1, heads: 1, kvHeads: 1, headDim: 2 },
      { q: [1, 2], k: [3, 4], v: [5, -6], out: [0, 0], lse: [0] },
    );
    expect(arr(v.out)).toEqual([5, -6]);
    expectClose(arr(v.lse), [11 / Math.sqrt(2)]);
  });

  it("averages the visible values when all keys are identical (causal running mean)", () => {
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 3, heads: 1, kvHeads: 1, headDim: 1 },
      { q: [0.3, -2, 5], k: [1, 1, 1], v: [3, 6, 12], out: [0, 0, 0], lse: [0, 0, 0] },
    );
    expectClose(arr(v.out), [3, 4.5, 7]);
  });

  it("averages only the last `window` values when all keys are identical (sliding running mean)", () => {
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 4, heads: 1, kvHeads: 1, headDim: 1, window: 2 },
      { q: [0.3, -2, 5, 1], k: [1, 1, 1, 1], v: [3, 6, 12, 2], out: [0, 0, 0, 0], lse: [0, 0, 0, 0] },
    );
    expectClose(arr(v.out), [3, 4.5, 9, 7]);
    // Two equal scores s: lse = s + ln 2 (scale 1/sqrt(1) = 1, s = q).
    expectClose(arr(v.lse), [0.3, -2 + Math.log(2), 5 + Math.log(2), 1 + Math.log(2)]);
  });

  it("averages the visible values of each document alone in a packed row (docStarts)", () => {
    // Documents [0, 2) and [2, 5): the third query starts its own running mean.
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 5, heads: 1, kvHeads: 1, headDim: 1 },
      { q: [0.3, -2, 5, 1, 2], k: [1, 1, 1, 1, 1], v: [3, 6, 12, 2, 4], out: [0, 0, 0, 0, 0], lse: [0, 0, 0, 0, 0], docStarts: [0, 0, 2, 2, 2] },
    );
    expectClose(arr(v.out), [3, 4.5, 12, 7, 6]);
  });

  it("is the causal mask when the window reaches the whole sequence or beyond", () => {
    const args = { q: [0.3, -2, 5], k: [1, 1, 1], v: [3, 6, 12], out: [0, 0, 0], lse: [0, 0, 0] };
    for (const window of [3, 40]) {
      const v = callOracle(oracle.attentionForward, { batch: 1, seqLen: 3, heads: 1, kvHeads: 1, headDim: 1, window }, args);
      expectClose(arr(v.out), [3, 4.5, 7]);
    }
  });

  it("weights values by softmax(scale q.k): scores [0, ln 3] give weights [1/4, 3/4] and lse = ln 4", () => {
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 2, heads: 1, kvHeads: 1, headDim: 1, scale: 1 },
      { q: [0, 1], k: [0, Math.log(3)], v: [4, 8], out: [0, 0], lse: [0, 0] },
    );
    expectClose(arr(v.out), [4, 7]);
    expectClose(arr(v.lse), [0, Math.log(4)]);
  });

  it("lets query heads share a kv head (GQA) and lays lse out as (batch, heads, seqLen)", () => {
    // heads 2, kvHeads 1, headDim 1, scale 1; token rows: q = [q_h0, q_h1]
    // t=1: head 0 scores [0, 0] -> mean; head 1 scores [0, ln 3] -> weights [1/4, 3/4]
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 2, heads: 2, kvHeads: 1, headDim: 1, scale: 1 },
      { q: [7, 7, 0, 1], k: [0, Math.log(3)], v: [4, 8], out: [0, 0, 0, 0], lse: [0, 0, 0, 0] },
    );
    expectClose(arr(v.out), [4, 4, 6, 7]);
    expectClose(arr(v.lse), [0, Math.log(2), 0, Math.log(4)]);
  });

  it("reads q, k, v and writes out at their row strides, leaving gaps alone", () => {
    // seqLen 2, headDim 1: q/k/v rows 3 apart (packed), out rows 2 apart.
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 2, heads: 1, kvHeads: 1, headDim: 1, scale: 1, qRowStride: 3, kvRowStride: 3, outRowStride: 2 },
      { q: [0, 99, 99, 1], k: [0, 99, 99, Math.log(3)], v: [4, 99, 99, 8], out: [0, -5, 0], lse: [0, 0] },
    );
    expectClose(arr(v.out), [4, -5, 7]);
  });

  it("reads v and writes out at vHeadDim wide, apart from headDim (MLA)", () => {
    // headDim 2, vHeadDim 3, scale 1: t=1 scores q1.k = [0, ln 3] -> weights [1/4, 3/4]
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 2, heads: 1, kvHeads: 1, headDim: 2, vHeadDim: 3, scale: 1 },
      { q: [2, 0, 1, 0], k: [0, 5, Math.log(3), 7], v: [4, 0, -8, 8, 4, 0], out: [0, 0, 0, 0, 0, 0], lse: [0, 0] },
    );
    expectClose(arr(v.out), [4, 0, -8, 7, 3, -2]);
    expectClose(arr(v.lse), [0, Math.log(4)]);
  });

  it("reads k and v at their own row strides when vHeadDim differs", () => {
    // As above with k rows 3 apart, v rows 4 apart, out rows 4 apart; gaps hold 99 / -5.
    const v = callOracle(
      oracle.attentionForward,
      { batch: 1, seqLen: 2, heads: 1, kvHeads: 1, headDim: 2, vHeadDim: 3, scale: 1, kvRowStride: 3, vRowStride: 4, outRowStride: 4 },
      { q: [2, 0, 1, 0], k: [0, 5, 99, Math.log(3), 7], v: [4, 0, -8, 99, 8, 4, 0], out: [0, 0, 0, -5, 0, 0, 0], lse: [0, 0] },
    );
    expectClose(arr(v.out), [4, 0, -8, -5, 7, 3, -2]);
  });
});

kernel("attentionBackward", () => {
  it("with seqLen 1 passes dOut to dV and gives zero dQ and dK (one key: softmax is constant)", () => {
    const v = callOracle(
      oracle.attentionBackward,
      { batch: 1, seqLen: 1, heads: 1, kvHeads: 1, headDim: 2 },
      { dOut: [1, -2], q: [1, 2], k: [3, 4], v: [5, -6], out: [5, -6], lse: [11 / Math.sqrt(2)], dQ: [9, 9], dK: [9, 9], dV: [9, 9] },
    );
    expectClose(arr(v.dQ), [0, 0]);
    expectClose(arr(v.dK), [0, 0]);
    expectClose(arr(v.dV), [1, -2]);
  });

  it("with a window of 1 passes dOut to dV row by row and gives zero dQ and dK", () => {
    // Each query sees its own key only: out = v, p = 1, so dS = 0.
    const v = callOracle(
      oracle.attentionBackward,
      { batch: 1, seqLen: 3, heads: 1, kvHeads: 1, headDim: 1, window: 1 },
      { dOut: [1, -2, 3], q: [1, 2, 3], k: [3, 4, 5], v: [5, -6, 7], out: [5, -6, 7], lse: [3, 8, 15], dQ: [9, 9, 9], dK: [9, 9, 9], dV: [9, 9, 9] },
    );
    expectClose(arr(v.dQ), [0, 0, 0]);
    expectClose(arr(v.dK), [0, 0, 0]);
    expectClose(arr(v.dV), [1, -2, 3]);
  });

  it("sums dV over the query heads that share a kv head", () => {
    const v = callOracle(
      oracle.attentionBackward,
      { batch: 1, seqLen: 1, heads: 2, kvHeads: 1, headDim: 1, scale: 1 },
      { dOut: [3, 4], q: [1, 2], k: [1], v: [5], out: [5, 5], lse: [1, 2], dQ: [9, 9], dK: [9], dV: [9] },
    );
    expectClose(arr(v.dV), [7]);
    expectClose(arr(v.dQ), [0, 0]);
    expectClose(arr(v.dK), [0]);
  });

  it("computes dQ, dK, dV of the two-token example by hand", () => {
    // scale 1, headDim 1, q = [0, 1], k = [0, ln 3], v = [4, 8]; out = [4, 7], lse = [0, ln 4]
    // dOut = [0, 1]: t = 1 has p = [1/4, 3/4], dP = [4, 8], D = 7, dS = p (dP - D) = [-3/4, 3/4]
    // dQ[1] = dS . k = 3/4 ln 3;  dK = dS * q[1] = [-3/4, 3/4];  dV = p * dOut[1] = [1/4, 3/4]
    const v = callOracle(
      oracle.attentionBackward,
      { batch: 1, seqLen: 2, heads: 1, kvHeads: 1, headDim: 1, scale: 1 },
      { dOut: [0, 1], q: [0, 1], k: [0, Math.log(3)], v: [4, 8], out: [4, 7], lse: [0, Math.log(4)], dQ: [9, 9], dK: [9, 9], dV: [9, 9] },
    );
    expectClose(arr(v.dQ), [0, 0.75 * Math.log(3)]);
    expectClose(arr(v.dK), [-0.75, 0.75]);
    expectClose(arr(v.dV), [0.25, 0.75]);
  });

  it("computes dQ, dK, dV by hand with vHeadDim 2 and headDim 1", () => {
    // scale 1, q = [0, 1], k = [0, ln 3], v = [[4, 2], [8, -2]]; out = [[4, 2], [7, -1]], lse = [0, ln 4]
    // dOut = [[0, 0], [1, 2]]: t = 1 has p = [1/4, 3/4], dP = v.dOut[1] = [8, 4], D = out[1].dOut[1] = 5,
    // dS = p (dP - D) = [3/4, -3/4];  dQ[1] = dS . k = -3/4 ln 3;  dK = dS q[1] = [3/4, -3/4];
    // dV = p dOut[1] = [[1/4, 1/2], [3/4, 3/2]]  (t = 0 adds dOut[0] = 0)
    const v = callOracle(
      oracle.attentionBackward,
      { batch: 1, seqLen: 2, heads: 1, kvHeads: 1, headDim: 1, vHeadDim: 2, scale: 1 },
      {
        dOut: [0, 0, 1, 2], q: [0, 1], k: [0, Math.log(3)], v: [4, 2, 8, -2], out: [4, 2, 7, -1], lse: [0, Math.log(4)],
        dQ: [9, 9], dK: [9, 9], dV: [9, 9, 9, 9],
      },
    );
    expectClose(arr(v.dQ), [0, -0.75 * Math.log(3)]);
    expectClose(arr(v.dK), [0.75, -0.75]);
    expectClose(arr(v.dV), [0.25, 0.5, 0.75, 1.5]);
  });
});
