import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { KernelArgumentError } from "../src/errors.js";
import { ropeInvFreq } from "../src/kernels/rope.js";
import { dropoutMix } from "../src/kernels/dropout.js";
import { oracle } from "../src/oracle/index.js";
import { arr, callOracle, expectClose } from "./support/call-oracle.js";
import { kernel } from "./support/hand-kernel.js";

// Small cases worked out by hand for every v1 oracle kernel, here and in the other
// oracle-hand*.test.ts files (attention; copyStrided, conv1d and mixture of experts; the SSD scan).

it("every oracle kernel has hand-computed cases in the oracle-hand test files", () => {
  const dir = path.dirname(fileURLToPath(import.meta.url));
  const files = fs.readdirSync(dir).filter((f) => /^oracle-hand.*\.test\.ts$/.test(f));
  const covered = new Set(files.flatMap((f) => [...fs.readFileSync(path.join(dir, f), "utf8").matchAll(/^kernel\("(\w+)"/gm)].map((m) => m[1])));
  expect(Object.keys(oracle).filter((k) => !covered.has(k))).toEqual([]);
  expect(Object.keys(oracle)).toHaveLength(44);
});

const S1 = 1 / (1 + Math.exp(-1)); // sigmoid(1)

kernel("matmul", () => {
  // A = [[1,2],[3,4]], B = [[5,6],[7,8]]  ->  A B = [[19,22],[43,50]]
  const A = [1, 2, 3, 4], At = [1, 3, 2, 4];
  const B = [5, 6, 7, 8], Bt = [5, 7, 6, 8];
  const AB = [19, 22, 43, 50];
  const dims = { m: 2, n: 2, k: 2, dtype: "f32" };

  it("multiplies 2x2 matrices for all four transpose combinations", () => {
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        const v = callOracle(oracle.matmul, { ...dims, transA, transB }, { a: transA ? At : A, b: transB ? Bt : B, c: [0, 0, 0, 0] });
        expect(arr(v.c), `transA=${transA} transB=${transB}`).toEqual(AB);
      }
    }
  });

  it("adds the bias to every row", () => {
    const v = callOracle(oracle.matmul, dims, { a: A, b: B, bias: [10, 20], c: [0, 0, 0, 0] });
    expect(arr(v.c)).toEqual([29, 42, 53, 70]);
  });

  it("scales by alpha and accumulates onto C without scaling C or the bias", () => {
    const v = callOracle(oracle.matmul, { ...dims, alpha: 2, accumulate: true }, { a: A, b: B, bias: [100, 0], c: [1, 2, 3, 4] });
    expect(arr(v.c)).toEqual([2 * 19 + 100 + 1, 2 * 22 + 2, 2 * 43 + 100 + 3, 2 * 50 + 4]);
  });

  it("overwrites C when not accumulating", () => {
    const v = callOracle(oracle.matmul, dims, { a: A, b: B, c: [9, 9, 9, 9] });
    expect(arr(v.c)).toEqual(AB);
  });

  it("handles non-square shapes: (1x3) @ (3x2) and its transposed storage", () => {
    // [1,2,3] @ [[1,0],[0,1],[1,1]] = [4,5]
    const v = callOracle(oracle.matmul, { m: 1, n: 2, k: 3 }, { a: [1, 2, 3], b: [1, 0, 0, 1, 1, 1], c: [0, 0] });
    expect(arr(v.c)).toEqual([4, 5]);
    // B stored (n, k) = [[1,0,1],[0,1,1]]
    const t = callOracle(oracle.matmul, { m: 1, n: 2, k: 3, transB: true }, { a: [1, 2, 3], b: [1, 0, 1, 0, 1, 1], c: [0, 0] });
    expect(arr(t.c)).toEqual([4, 5]);
    // (3x1) @ (1x2): outer product, A stored (k=1, m=3) when transposed is the same memory.
    const o = callOracle(oracle.matmul, { m: 3, n: 2, k: 1, transA: true }, { a: [1, 2, 3], b: [10, 20], c: new Array(6).fill(0) });
    expect(arr(o.c)).toEqual([10, 20, 20, 40, 30, 60]);
  });

  it("runs batch items at their strides, broadcasts B with strideB 0 and leaves C's gaps alone", () => {
    // batch item 0: A = I, item 1: A = 2I; B shared; C items 5 apart with a 1-element gap.
    const v = callOracle(
      oracle.matmul,
      { ...dims, batch: 2, strideB: 0, strideC: 5 },
      { a: [1, 0, 0, 1, 2, 0, 0, 2], b: B, c: [0, 0, 0, 0, -7, 0, 0, 0, 0] },
    );
    expect(arr(v.c)).toEqual([5, 6, 7, 8, -7, 10, 12, 14, 16]);
  });
});

kernel("sumRows", () => {
  it("sums the rows of a 2x3 matrix into 3 columns", () => {
    const v = callOracle(oracle.sumRows, { rows: 2, cols: 3 }, { x: [1, 2, 3, 4, 5, 6], out: [9, 9, 9] });
    expect(arr(v.out)).toEqual([5, 7, 9]);
  });

  it("accumulates onto out when asked", () => {
    const v = callOracle(oracle.sumRows, { rows: 2, cols: 3, accumulate: true }, { x: [1, 2, 3, 4, 5, 6], out: [1, 1, 1] });
    expect(arr(v.out)).toEqual([6, 8, 10]);
  });
});

kernel("embeddingForward", () => {
  const table = [0, 1, 10, 11, 20, 21]; // vocab 3, dim 2
  it("gathers table rows by id, repeats included", () => {
    const v = callOracle(oracle.embeddingForward, { count: 3, vocab: 3, dim: 2 }, { ids: [2, 0, 2], table, out: new Array(6).fill(0) });
    expect(arr(v.out)).toEqual([20, 21, 0, 1, 20, 21]);
  });

  it("rejects ids outside [0, vocab)", () => {
    for (const bad of [3, -1]) {
      expect(() =>
        callOracle(oracle.embeddingForward, { count: 1, vocab: 3, dim: 2 }, { ids: [bad], table, out: [0, 0] }),
      ).toThrow(KernelArgumentError);
    }
  });
});

kernel("embeddingBackward", () => {
  it("adds dOut rows into dTable, summing repeated ids and leaving unused rows", () => {
    const v = callOracle(
      oracle.embeddingBackward,
      { count: 3, vocab: 3, dim: 2 },
      { ids: [2, 0, 2], dOut: [1, 2, 3, 4, 5, 6], dTable: [0, 0, 0, 0, 0, 0] },
    );
    expect(arr(v.dTable)).toEqual([3, 4, 0, 0, 6, 8]);
  });

  it("accumulates onto what dTable already holds", () => {
    const v = callOracle(
      oracle.embeddingBackward,
      { count: 2, vocab: 2, dim: 1 },
      { ids: [1, 1], dOut: [2, 3], dTable: [7, 100] },
    );
    expect(arr(v.dTable)).toEqual([7, 105]);
  });

  it("rejects ids outside [0, vocab)", () => {
    expect(() =>
      callOracle(oracle.embeddingBackward, { count: 1, vocab: 2, dim: 1 }, { ids: [2], dOut: [1], dTable: [0, 0] }),
    ).toThrow(KernelArgumentError);
  });
});

kernel("layerNormForward", () => {
  const eps = 1e-5;
  it("normalises [1,2,3] with mean 2 and rstd 1/sqrt(2/3 + eps)", () => {
    const v = callOracle(
      oracle.layerNormForward,
      { rows: 1, dim: 3, eps },
      { x: [1, 2, 3], weight: [1, 1, 1], out: [0, 0, 0], mean: [0], rstd: [0] },
    );
    const rstd = 1 / Math.sqrt(2 / 3 + eps);
    expect(v.mean[0]).toBe(2);
    expectClose([v.rstd[0]], [rstd]);
    expectClose(arr(v.out), [-rstd, 0, rstd]);
    // Without eps the output would be [-sqrt(1.5), 0, sqrt(1.5)].
    expectClose(arr(v.out), [-Math.sqrt(1.5), 0, Math.sqrt(1.5)], 1e-5);
  });

  it("applies weight and bias per column, each row on its own statistics", () => {
    const v = callOracle(
      oracle.layerNormForward,
      { rows: 2, dim: 3, eps },
      { x: [1, 2, 3, 5, 5, 5], weight: [2, 1, 0.5], bias: [1, -1, 0], out: new Array(6).fill(0), mean: [0, 0], rstd: [0, 0] },
    );
    const r0 = 1 / Math.sqrt(2 / 3 + eps);
    expectClose(arr(v.mean), [2, 5]);
    expectClose(arr(v.rstd), [r0, 1 / Math.sqrt(eps)]);
    // A constant row normalises to 0, leaving only the bias.
    expectClose(arr(v.out), [-2 * r0 + 1, -1, 0.5 * r0, 1, -1, 0]);
  });
});

kernel("layerNormBackward", () => {
  // x = [1,2,3], mean 2, rstd 0.5 -> xhat = [-0.5, 0, 0.5]; weight [1,2,3], dOut [1,1,1]
  // g = [1,2,3], mean(g) = 2, mean(g*xhat) = (−0.5 + 0 + 1.5)/3 = 1/3
  // dX = 0.5 * (g - 2 - xhat/3) = [-5/12, 0, 5/12]
  const values = () => ({ dOut: [1, 1, 1], x: [1, 2, 3], weight: [1, 2, 3], mean: [2], rstd: [0.5], dX: [9, 9, 9] });

  it("computes dX, dWeight and dBias of one row", () => {
    const v = callOracle(oracle.layerNormBackward, { rows: 1, dim: 3 }, { ...values(), dWeight: [0, 0, 0], dBias: [0, 0, 0] });
    expectClose(arr(v.dX), [-5 / 12, 0, 5 / 12]);
    expectClose(arr(v.dWeight), [-0.5, 0, 0.5]);
    expectClose(arr(v.dBias), [1, 1, 1]);
  });

  it("accumulates dWeight and dBias onto their previous contents and works without dBias", () => {
    const v = callOracle(oracle.layerNormBackward, { rows: 1, dim: 3 }, { ...values(), dWeight: [1, 1, 1], dBias: [0, 2, 4] });
    expectClose(arr(v.dWeight), [0.5, 1, 1.5]);
    expectClose(arr(v.dBias), [1, 3, 5]);
    const noBias = callOracle(oracle.layerNormBackward, { rows: 1, dim: 3 }, { ...values(), dWeight: [0, 0, 0] });
    expectClose(arr(noBias.dX), [-5 / 12, 0, 5 / 12]);
  });
});

kernel("rmsNormForward", () => {
  it("divides [3,-3,3,-3] by its rms 3 and applies the weight", () => {
    const eps = 1e-5;
    const v = callOracle(
      oracle.rmsNormForward,
      { rows: 1, dim: 4, eps },
      { x: [3, -3, 3, -3], weight: [1, 2, 3, 4], out: [0, 0, 0, 0], rstd: [0] },
    );
    const r = 1 / Math.sqrt(9 + eps);
    expectClose([v.rstd[0]], [r]);
    expectClose(arr(v.out), [3 * r, -6 * r, 9 * r, -12 * r]);
    expectClose(arr(v.out), [1, -2, 3, -4], 1e-6);
  });

  it("scales by weight + weightOffset (Gemma's 1 + weight: zeros keep the normed x)", () => {
    const v = callOracle(oracle.rmsNormForward, { rows: 1, dim: 2, eps: 1e-12, weightOffset: 1 }, { x: [2, 4], weight: [0, 1], out: [0, 0], rstd: [0] });
    expectClose(arr(v.out), [2 / Math.sqrt(10), 8 / Math.sqrt(10)], 1e-10);
  });

  it("does not subtract the mean: [2,4] has rstd 1/sqrt(10)", () => {
    const v = callOracle(oracle.rmsNormForward, { rows: 1, dim: 2, eps: 1e-12 }, { x: [2, 4], weight: [1, 1], out: [0, 0], rstd: [0] });
    expectClose(arr(v.out), [2 / Math.sqrt(10), 4 / Math.sqrt(10)], 1e-10);
  });
});

kernel("rmsNormBackward", () => {
  // x = [1,2], rstd 0.5 -> xhat = [0.5, 1]; weight [1,1], dOut [1,0] -> g = [1,0]
  // mean(g*xhat) = 0.25;  dX = 0.5 * ([1,0] - 0.25*[0.5,1]) = [0.4375, -0.125]
  it("computes dX and accumulates dWeight", () => {
    const v = callOracle(
      oracle.rmsNormBackward,
      { rows: 1, dim: 2 },
      { dOut: [1, 0], x: [1, 2], weight: [1, 1], rstd: [0.5], dX: [7, 7], dWeight: [10, 20] },
    );
    expectClose(arr(v.dX), [0.4375, -0.125]);
    expectClose(arr(v.dWeight), [10.5, 20]);
  });

  it("uses weight + weightOffset in dX and leaves dWeight as without it", () => {
    // weight [0,0] + 1 is the case above.
    const v = callOracle(
      oracle.rmsNormBackward,
      { rows: 1, dim: 2, weightOffset: 1 },
      { dOut: [1, 0], x: [1, 2], weight: [0, 0], rstd: [0.5], dX: [7, 7], dWeight: [10, 20] },
    );
    expectClose(arr(v.dX), [0.4375, -0.125]);
    expectClose(arr(v.dWeight), [10.5, 20]);
  });
});

kernel("geluForward", () => {
  it("gives gelu(1) = 0.8411919906082768 (tanh approximation) and gelu(0) = 0", () => {
    const v = callOracle(oracle.geluForward, { n: 3 }, { x: [1, 0, -1], out: [0, 0, 0] });
    expectClose(arr(v.out), [0.8411919906082768, 0, 0.8411919906082768 - 1], 1e-15);
  });

  it("tends to x for large x and to 0 for large negative x, with gelu(x) - gelu(-x) = x", () => {
    const v = callOracle(oracle.geluForward, { n: 4 }, { x: [10, -10, 2.5, -2.5], out: [0, 0, 0, 0] });
    expectClose([v.out[0], v.out[1]], [10, 0], 1e-12);
    expectClose([v.out[2] - v.out[3]], [2.5], 1e-14);
  });
});

kernel("geluBackward", () => {
  it("gives gelu'(0) = 0.5 times dOut", () => {
    const v = callOracle(oracle.geluBackward, { n: 1 }, { x: [0], dOut: [3], dX: [0] });
    expectClose(arr(v.dX), [1.5]);
  });

  it("satisfies gelu'(x) + gelu'(-x) = 1 and tends to 1 / 0 in the tails", () => {
    const v = callOracle(oracle.geluBackward, { n: 4 }, { x: [1.3, -1.3, 12, -12], dOut: [1, 1, 1, 1], dX: [0, 0, 0, 0] });
    expectClose([v.dX[0] + v.dX[1]], [1], 1e-14);
    expectClose([v.dX[2], v.dX[3]], [1, 0], 1e-12);
  });
});

kernel("siluForward", () => {
  it("gives silu(1) = 0.7310585786300049, silu(0) = 0, silu(-1) = -0.2689414213699951", () => {
    const v = callOracle(oracle.siluForward, { n: 3 }, { x: [1, 0, -1], out: [0, 0, 0] });
    expectClose(arr(v.out), [0.7310585786300049, 0, -0.2689414213699951], 1e-15);
  });
});

kernel("siluBackward", () => {
  it("gives silu'(0) = 0.5, silu'(1) = s(2-s), silu'(-1) = (1-s)^2 with s = sigmoid(1)", () => {
    const v = callOracle(oracle.siluBackward, { n: 3 }, { x: [0, 1, -1], dOut: [2, 1, -1], dX: [0, 0, 0] });
    expectClose(arr(v.dX), [1, S1 * (2 - S1), -((1 - S1) ** 2)], 1e-15);
    expectClose([v.dX[1]], [0.9276705118714869], 1e-15);
  });
});

kernel("swiGluForward", () => {
  it("computes silu(gate) * up", () => {
    const v = callOracle(oracle.swiGluForward, { n: 3 }, { gate: [1, 0, -1], up: [2, 5, 1], out: [0, 0, 0] });
    expectClose(arr(v.out), [2 * 0.7310585786300049, 0, -0.2689414213699951], 1e-15);
  });

  it("computes gelu(gate) * up with activation gelu (GeGLU)", () => {
    const v = callOracle(oracle.swiGluForward, { n: 3, activation: "gelu" }, { gate: [1, 0, -1], up: [2, 5, 1], out: [0, 0, 0] });
    expectClose(arr(v.out), [2 * 0.8411919906082768, 0, 0.8411919906082768 - 1], 1e-15);
  });
});

kernel("swiGluBackward", () => {
  it("computes dGate = dOut*up*silu'(gate) and dUp = dOut*silu(gate)", () => {
    const v = callOracle(
      oracle.swiGluBackward,
      { n: 3 },
      { gate: [1, 0, -1], up: [2, 5, 1], dOut: [1, 1, 2], dGate: [9, 9, 9], dUp: [9, 9, 9] },
    );
    expectClose(arr(v.dGate), [2 * S1 * (2 - S1), 2.5, 2 * (1 - S1) ** 2], 1e-15);
    expectClose(arr(v.dUp), [S1, 0, -2 * (1 - S1)], 1e-15);
  });
});

kernel("ropeForward", () => {
  // headDim 4 -> half 2; theta 10000: freq_0 = 1, freq_1 = 10000^(-1/2) = 0.01.
  const dims = { batch: 1, seqLen: 2, heads: 1, headDim: 4, theta: 10000 };

  it("is the identity at position 0 and rotates (i, i+half) pairs by p*freq_i at position p", () => {
    // token 0 = [1,2,3,4] (position 0), token 1 = [1,0,0,1] (position 1)
    const v = callOracle(oracle.ropeForward, dims, { x: [1, 2, 3, 4, 1, 0, 0, 1], out: new Array(8).fill(0) });
    expectClose(arr(v.out).slice(0, 4), [1, 2, 3, 4], 1e-15);
    // pair 0: (x0, x2) = (1, 0) rotated by 1 rad -> (cos 1, sin 1)
    // pair 1: (x1, x3) = (0, 1) rotated by 0.01 rad -> (-sin 0.01, cos 0.01)
    expectClose(arr(v.out).slice(4), [Math.cos(1), -Math.sin(0.01), Math.sin(1), Math.cos(0.01)], 1e-15);
  });

  it("counts positions from each token's document start in a packed row (docStarts)", () => {
    // Two tokens, the second starting a document of its own: both at position 0, so both unrotated.
    const v = callOracle(oracle.ropeForward, { ...dims, seqLen: 2 }, { x: [1, 2, 3, 4, 1, 0, 0, 1], out: new Array(8).fill(0), docStarts: [0, 1] });
    expectClose(arr(v.out), [1, 2, 3, 4, 1, 0, 0, 1], 1e-15);
  });

  it("starts positions at posOffset and restarts them for every batch item", () => {
    const x = [1, 0, 0, 0];
    const v = callOracle(oracle.ropeForward, { ...dims, batch: 2, seqLen: 1, posOffset: 3 }, { x: [...x, ...x], out: new Array(8).fill(0) });
    const expected = [Math.cos(3), 0, Math.sin(3), 0];
    expectClose(arr(v.out), [...expected, ...expected], 1e-15);
  });

  it("rotates every head of a row the same way and leaves the gaps of a strided layout alone", () => {
    // two heads of headDim 2 (freq 1 only), rows 5 apart: 4 logical + 1 gap.
    const v = callOracle(
      oracle.ropeForward,
      { batch: 1, seqLen: 2, heads: 2, headDim: 2, rowStride: 5, theta: 10000 },
      { x: [1, 0, 0, 1, 42, 1, 0, 0, 1], out: [0, 0, 0, 0, -1, 0, 0, 0, 0] },
    );
    const c = Math.cos(1), s = Math.sin(1);
    expectClose(arr(v.out), [1, 0, 0, 1, -1, c, s, -s, c], 1e-15);
  });
});

describe("rope scaling", () => {
  it("divides every frequency by the factor (linear): position 4 at factor 4 turns like position 1", () => {
    const x = [1, 0, 0, 0];
    const linear = callOracle(oracle.ropeForward, { batch: 1, seqLen: 1, heads: 1, headDim: 4, theta: 10000, posOffset: 4, scaling: { type: "linear", factor: 4 } }, { x, out: [0, 0, 0, 0] });
    expectClose(arr(linear.out), [Math.cos(1), 0, Math.sin(1), 0], 1e-15);
  });

  it("keeps short wavelengths, divides long ones by the factor and blends between (llama3)", () => {
    // headDim 6, theta 100: freqs 1, 100^(-1/3), 100^(-2/3); wavelengths 2pi, 2pi*4.64, 2pi*21.5 (6.3, 29.2, 135.3).
    // L = 64, low 1, high 4: kept below 16, divided above 64, blended between with s = (64/w - 1)/3.
    const f = ropeInvFreq({ headDim: 6, theta: 100, scaling: { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 64 } });
    const f1 = 100 ** (-1 / 3), s = (64 / ((2 * Math.PI) / f1) - 1) / 3;
    expectClose(arr(f), [1, (1 - s) * (f1 / 8) + s * f1, 100 ** (-2 / 3) / 8], 1e-15);
  });
});

kernel("ropeBackward", () => {
  it("rotates by the opposite angle, so it undoes the forward rotation", () => {
    const dims = { batch: 1, seqLen: 3, heads: 1, headDim: 4, theta: 100, posOffset: 2 };
    const x = [0.5, -1, 2, 3, 1, 2, 3, 4, -4, 0.25, 1, 7];
    const f = callOracle(oracle.ropeForward, dims, { x, out: new Array(12).fill(0) });
    const b = callOracle(oracle.ropeBackward, dims, { x: f.out, out: new Array(12).fill(0) });
    expectClose(arr(b.out), x, 1e-14);
  });

  it("rotates (1, 0) at position 1 to (cos 1, -sin 1)", () => {
    const v = callOracle(oracle.ropeBackward, { batch: 1, seqLen: 2, heads: 1, headDim: 2, theta: 10000 }, { x: [0, 0, 1, 0], out: [0, 0, 0, 0] });
    expectClose(arr(v.out), [0, 0, Math.cos(1), -Math.sin(1)], 1e-15);
  });
});

kernel("crossEntropyForward", () => {
  it("gives log(V) for uniform logits, whatever the target", () => {
    const v = callOracle(
      oracle.crossEntropyForward,
      { rows: 2, vocab: 4 },
      { logits: [0, 0, 0, 0, 5, 5, 5, 5], targets: [1, 3], losses: [0, 0], lse: [0, 0] },
    );
    expectClose(arr(v.losses), [Math.log(4), Math.log(4)]);
    expectClose(arr(v.lse), [Math.log(4), 5 + Math.log(4)]);
  });

  it("gives lse - logit[target]: logits [0, ln 3] give losses ln(4/3) and ln 4", () => {
    const v = callOracle(
      oracle.crossEntropyForward,
      { rows: 2, vocab: 2 },
      { logits: [0, Math.log(3), 0, Math.log(3)], targets: [1, 0], losses: [0, 0], lse: [0, 0] },
    );
    expectClose(arr(v.losses), [Math.log(4 / 3), Math.log(4)]);
  });

  it("gives loss 0 for an ignored (negative) target but still writes lse", () => {
    const v = callOracle(oracle.crossEntropyForward, { rows: 1, vocab: 3 }, { logits: [1, 1, 1], targets: [-1], losses: [9], lse: [0] });
    expect(v.losses[0]).toBe(0);
    expectClose(arr(v.lse), [1 + Math.log(3)]);
  });

  it("is stable for large logits", () => {
    const v = callOracle(oracle.crossEntropyForward, { rows: 1, vocab: 2 }, { logits: [1000, 1000], targets: [0], losses: [0], lse: [0] });
    expectClose(arr(v.losses), [Math.log(2)]);
  });

  it("rejects a target >= vocab", () => {
    expect(() =>
      callOracle(oracle.crossEntropyForward, { rows: 1, vocab: 3 }, { logits: [1, 1, 1], targets: [3], losses: [0], lse: [0] }),
    ).toThrow(KernelArgumentError);
  });
});

kernel("crossEntropyBackward", () => {
  it("gives lossScale * (softmax - onehot) and zeros ignored rows", () => {
    const v = callOracle(
      oracle.crossEntropyBackward,
      { rows: 2, vocab: 4, lossScale: 0.5 },
      { logits: [0, 0, 0, 0, 1, 2, 3, 4], targets: [2, -1], lse: [Math.log(4), 0], dLogits: new Array(8).fill(9) },
    );
    expectClose(arr(v.dLogits), [0.125, 0.125, -0.375, 0.125, 0, 0, 0, 0]);
  });

  it("rows of dLogits sum to zero for a valid target", () => {
    const logits = [0.5, -1, 2];
    const lse = Math.log(Math.exp(0.5) + Math.exp(-1) + Math.exp(2));
    const v = callOracle(oracle.crossEntropyBackward, { rows: 1, vocab: 3, lossScale: 1 }, { logits, targets: [0], lse: [lse], dLogits: [0, 0, 0] });
    expectClose([v.dLogits[0] + v.dLogits[1] + v.dLogits[2]], [0]);
    expectClose([v.dLogits[2]], [Math.exp(2 - lse)]);
  });
});

kernel("softmaxForward", () => {
  it("gives [1/4, 3/4] for [0, ln 3]", () => {
    const v = callOracle(oracle.softmaxForward, { rows: 1, dim: 2 }, { x: [0, Math.log(3)], out: [0, 0] });
    expectClose(arr(v.out), [0.25, 0.75]);
  });

  it("divides by the temperature first: [0, 2 ln 3] at temperature 2 gives [1/4, 3/4]", () => {
    const v = callOracle(oracle.softmaxForward, { rows: 1, dim: 2, temperature: 2 }, { x: [0, 2 * Math.log(3)], out: [0, 0] });
    expectClose(arr(v.out), [0.25, 0.75]);
  });

  it("handles each row on its own and stays finite for large inputs", () => {
    const v = callOracle(oracle.softmaxForward, { rows: 2, dim: 2 }, { x: [1000, 1000, -1000, -1000 + Math.log(3)], out: [0, 0, 0, 0] });
    expectClose(arr(v.out), [0.5, 0.5, 0.25, 0.75]);
  });
});

kernel("add", () => {
  it("adds element-wise", () => {
    const v = callOracle(oracle.add, { n: 3 }, { a: [1, 2, -3], b: [3, 4, 0.5], out: [0, 0, 0] });
    expect(arr(v.out)).toEqual([4, 6, -2.5]);
  });

  it("touches only the first n elements", () => {
    const v = callOracle(oracle.add, { n: 1 }, { a: [1, 2], b: [1, 2], out: [0, -1] });
    expect(arr(v.out)).toEqual([2, -1]);
  });
});

kernel("scale", () => {
  it("multiplies by alpha", () => {
    const v = callOracle(oracle.scale, { n: 3, alpha: -2 }, { x: [1, 2, 0.25], out: [0, 0, 0] });
    expect(arr(v.out)).toEqual([-2, -4, -0.5]);
  });
});

kernel("dropout", () => {
  it("keeps element i when mix(i ^ mix(seed)) >> 8 reaches ceil(p 2^24), scaling it by 1 / (1 - p)", () => {
    // mix(7) and the four hashes (>> 8) computed apart: 5549290, 8708068, 10036714, 5053508 against 2^23.
    const v = callOracle(oracle.dropout, { n: 4, p: 0.5, seed: 7 }, { x: [1, 2, 3, 4], out: [9, 9, 9, 9] });
    expect(arr(v.out)).toEqual([0, 4, 6, 0]);
    expect(dropoutMix(0)).toBe(0);
    expect(dropoutMix(1)).toBe(0x688990c0);
  });

  it("copies x at p = 0", () => {
    expect(arr(callOracle(oracle.dropout, { n: 3, p: 0, seed: 1 }, { x: [1, -2, 0.5], out: [0, 0, 0] }).out)).toEqual([1, -2, 0.5]);
  });
});

kernel("sum", () => {
  it("sums n elements into out[0], overwriting or accumulating", () => {
    expect(callOracle(oracle.sum, { n: 4 }, { x: [1, 2, 3, 4], out: [100] }).out[0]).toBe(10);
    expect(callOracle(oracle.sum, { n: 4, accumulate: true }, { x: [1, 2, 3, -4], out: [5] }).out[0]).toBe(7);
    expect(callOracle(oracle.sum, { n: 2 }, { x: [1, 2, 3], out: [0] }).out[0]).toBe(3);
  });
});

kernel("sumSquares", () => {
  it("sums squares into out[0], overwriting or accumulating", () => {
    expect(callOracle(oracle.sumSquares, { n: 3 }, { x: [1, -2, 3], out: [100] }).out[0]).toBe(14);
    expect(callOracle(oracle.sumSquares, { n: 3, accumulate: true }, { x: [1, -2, 3], out: [1] }).out[0]).toBe(15);
  });
});

kernel("adamW", () => {
  const hp = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1 };

  it("first step from m = v = 0 moves each weight by about lr * sign(g) (bias correction)", () => {
    const g = [0.5, -2, 1e-3];
    const v = callOracle(oracle.adamW, { ...hp, n: 3 }, { param: [1, 1, 1], grad: g, m: [0, 0, 0], v: [0, 0, 0] });
    expectClose(arr(v.param), [0.9, 1.1, 0.9], 1e-5);
    expectClose(arr(v.m), g.map((x) => 0.1 * x));
    expectClose(arr(v.v), g.map((x) => 0.001 * x * x));
  });

  it("does not move a weight whose gradient and moments are zero", () => {
    const v = callOracle(oracle.adamW, { ...hp, n: 1 }, { param: [3], grad: [0], m: [0], v: [0] });
    expect(arr(v.param)).toEqual([3]);
  });

  it("applies decoupled weight decay lr * wd * w before the Adam update", () => {
    const v = callOracle(oracle.adamW, { ...hp, weightDecay: 0.1, n: 2 }, { param: [1, -2], grad: [0, 1], m: [0, 0], v: [0, 0] });
    // 1 - 0.1*0.1*1 = 0.99;  -2 + 0.1*0.1*2 - 0.1 = -2.08
    expectClose(arr(v.param), [0.99, -2.08], 1e-6);
  });

  it("updates from the f32 master copy when given and writes it to both", () => {
    const v = callOracle(oracle.adamW, { ...hp, n: 1 }, { param: [0], master: [2], grad: [1], m: [0], v: [0] });
    expectClose(arr(v.master), [1.9], 1e-6);
    expect(v.param[0]).toBe(v.master[0]);
  });

  it("multiplies the gradient by gradScale before the moments", () => {
    const v = callOracle(oracle.adamW, { ...hp, gradScale: 0.5, n: 1 }, { param: [0], grad: [4], m: [0], v: [0] });
    expectClose(arr(v.m), [0.2]);
    expectClose(arr(v.v), [0.004]);
  });

  it("takes a second step with the bias corrections of step 2", () => {
    // m = 0.1, v = 0.001 after step 1 with g = 1; step 2 with g = 1:
    // m = 0.09 + 0.1 = 0.19, v = 0.000999 + 0.001 = 0.001999;  mhat = 0.19/0.19 = 1, vhat = 0.001999/0.001999 = 1
    const v = callOracle(oracle.adamW, { ...hp, step: 2, n: 1 }, { param: [0], grad: [1], m: [0.1], v: [0.001] });
    expectClose(arr(v.m), [0.19]);
    expectClose(arr(v.v), [0.001999]);
    expectClose(arr(v.param), [-0.1], 1e-6);
  });
});

kernel("cast", () => {
  it("copies the first n values (rounding to the destination dtype happens on store)", () => {
    const v = callOracle(oracle.cast, { n: 3, srcDtype: "f32", dstDtype: "bf16" }, { src: [1.5, -2, 3.25, 8], dst: [0, 0, 0, -1] });
    expect(arr(v.dst)).toEqual([1.5, -2, 3.25, -1]);
  });
});

kernel("fill", () => {
  it("writes value to the first n elements only", () => {
    const v = callOracle(oracle.fill, { n: 3, value: 7, dtype: "f32" }, { out: [0, 0, 0, -1, -1] });
    expect(arr(v.out)).toEqual([7, 7, 7, -1, -1]);
  });
});

kernel("checkFinite", () => {
  const run = (x: number[], flag: number) => callOracle(oracle.checkFinite, { n: x.length }, { x, flag: [flag] }).flag[0];

  it("sets the flag for NaN, +inf and -inf", () => {
    expect(run([1, NaN, 2], 0)).toBe(1);
    expect(run([Infinity], 0)).toBe(1);
    expect(run([0, -Infinity], 0)).toBe(1);
  });

  it("leaves the flag as it was when everything is finite", () => {
    expect(run([1, -2, 3e38, -0], 0)).toBe(0);
    expect(run([1, 2], 1)).toBe(1);
  });

  it("looks only at the first n elements", () => {
    expect(callOracle(oracle.checkFinite, { n: 1 }, { x: [1, NaN], flag: [0] }).flag[0]).toBe(0);
  });
});
