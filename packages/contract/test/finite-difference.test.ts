import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BACKWARD_OF } from "../src/kernels/index.js";
import { oracle } from "../src/oracle/index.js";
import { type Values, call, dotAt, expectAccumulated, expectGradient, forwardKernel as group, maxAbs, rng, stridedIndices, uniform } from "./support/finite-difference.js";

// Every backward oracle against central finite differences of its forward oracle, in f64,
// here and in the other finite-difference*.test.ts files (Mamba2's convolution and scan).
// The scalar loss is sum(forwardOutput * R) for a fixed random R, so dOut = R.

const checked = new Set<string>();
function forwardKernel(name: keyof typeof BACKWARD_OF, body: () => void): void {
  checked.add(name);
  group(name, body);
}

it("covers every forward kernel that has a backward, here or in the other finite-difference test files", () => {
  const dir = path.dirname(fileURLToPath(import.meta.url));
  const others = fs.readdirSync(dir).filter((f) => /^finite-difference-.*\.test\.ts$/.test(f));
  for (const f of others) for (const m of fs.readFileSync(path.join(dir, f), "utf8").matchAll(/^forwardKernel\("(\w+)"/gm)) checked.add(m[1]);
  expect(Object.keys(BACKWARD_OF).filter((k) => !checked.has(k))).toEqual([]);
});

forwardKernel("embeddingForward", () => {
  const count = 9, vocab = 7, dim = 5;
  const rand = rng(11);
  const ids = Float64Array.from([3, 0, 3, 6, 1, 3, 0, 5, 1]); // repeats; id 2 and 4 unused
  const table = uniform(rand, vocab * dim);
  const R = uniform(rand, count * dim);
  const loss = () => {
    const v = call(oracle.embeddingForward, { count, vocab, dim }, { ids, table, out: new Float64Array(count * dim) });
    return dotAt(v.out, R);
  };
  const backward = (start: Float64Array) =>
    call(oracle.embeddingBackward, { count, vocab, dim }, { ids, dOut: R, dTable: start.slice() }).dTable;

  it("dTable matches finite differences (repeated ids sum, unused rows zero)", () => {
    expectGradient("dTable", table, backward(new Float64Array(vocab * dim)), loss);
  });

  it("dTable accumulates onto a non-zero start", () => {
    const start = uniform(rand, vocab * dim);
    expectAccumulated(backward(start), start, backward(new Float64Array(vocab * dim)));
  });
});

forwardKernel("layerNormForward", () => {
  const rows = 4, dim = 7, eps = 1e-5;
  for (const withBias of [true, false]) {
    describe(withBias ? "with bias" : "without bias", () => {
      const rand = rng(withBias ? 21 : 22);
      const x = uniform(rand, rows * dim, -2, 2);
      const weight = uniform(rand, dim, 0.5, 1.5);
      const bias = uniform(rand, dim);
      const R = uniform(rand, rows * dim);
      const forward = () => {
        const v: Values = { x, weight, out: new Float64Array(rows * dim), mean: new Float64Array(rows), rstd: new Float64Array(rows) };
        if (withBias) v.bias = bias;
        return call(oracle.layerNormForward, { rows, dim, eps }, v);
      };
      const loss = () => dotAt(forward().out, R);
      const backward = (dWeight: Float64Array, dBias: Float64Array) => {
        const f = forward();
        const v: Values = { dOut: R, x, weight, mean: f.mean, rstd: f.rstd, dX: new Float64Array(rows * dim), dWeight: dWeight.slice() };
        if (withBias) v.dBias = dBias.slice();
        return call(oracle.layerNormBackward, { rows, dim }, v);
      };
      const zeros = () => new Float64Array(dim);

      it("dX matches finite differences", () => {
        expectGradient("dX", x, backward(zeros(), zeros()).dX, loss);
      });

      it("dWeight matches finite differences", () => {
        expectGradient("dWeight", weight, backward(zeros(), zeros()).dWeight, loss);
      });

      if (withBias) {
        it("dBias matches finite differences", () => {
          expectGradient("dBias", bias, backward(zeros(), zeros()).dBias, loss);
        });

        it("dWeight and dBias accumulate onto a non-zero start", () => {
          const w0 = uniform(rand, dim), b0 = uniform(rand, dim);
          const fresh = backward(zeros(), zeros());
          const acc = backward(w0, b0);
          expectAccumulated(acc.dWeight, w0, fresh.dWeight);
          expectAccumulated(acc.dBias, b0, fresh.dBias);
        });
      }
    });
  }
});

forwardKernel("rmsNormForward", () => {
  const rows = 3, dim = 8, eps = 1e-5;
  const rand = rng(31);
  const x = uniform(rand, rows * dim, -2, 2);
  const weight = uniform(rand, dim, 0.5, 1.5);
  const R = uniform(rand, rows * dim);
  const forward = (weightOffset = 0) =>
    call(oracle.rmsNormForward, { rows, dim, eps, weightOffset }, { x, weight, out: new Float64Array(rows * dim), rstd: new Float64Array(rows) });
  const loss = (weightOffset = 0) => () => dotAt(forward(weightOffset).out, R);
  const backward = (dWeight: Float64Array, weightOffset = 0) =>
    call(
      oracle.rmsNormBackward,
      { rows, dim, weightOffset },
      { dOut: R, x, weight, rstd: forward(weightOffset).rstd, dX: new Float64Array(rows * dim), dWeight: dWeight.slice() },
    );

  it("dX matches finite differences", () => {
    expectGradient("dX", x, backward(new Float64Array(dim)).dX, loss());
  });

  it("dWeight matches finite differences", () => {
    expectGradient("dWeight", weight, backward(new Float64Array(dim)).dWeight, loss());
  });

  it("dX and dWeight match finite differences with Gemma's weight + 1", () => {
    expectGradient("dX", x, backward(new Float64Array(dim), 1).dX, loss(1));
    expectGradient("dWeight", weight, backward(new Float64Array(dim), 1).dWeight, loss(1));
  });

  it("dWeight accumulates onto a non-zero start", () => {
    const w0 = uniform(rand, dim);
    expectAccumulated(backward(w0).dWeight, w0, backward(new Float64Array(dim)).dWeight);
  });
});

for (const [fwd, bwd, seed] of [
  ["geluForward", oracle.geluBackward, 41],
  ["siluForward", oracle.siluBackward, 42],
] as const) {
  forwardKernel(fwd, () => {
    it("dX matches finite differences over [-4, 4]", () => {
      const n = 60;
      const rand = rng(seed);
      const x = uniform(rand, n, -4, 4);
      const R = uniform(rand, n);
      const loss = () => dotAt(call(oracle[fwd], { n }, { x, out: new Float64Array(n) }).out, R);
      const dX = call(bwd, { n }, { x, dOut: R, dX: new Float64Array(n) }).dX;
      expectGradient("dX", x, dX, loss);
    });
  });
}

forwardKernel("swiGluForward", () => {
  const n = 50;
  const rand = rng(51);
  const gate = uniform(rand, n, -4, 4);
  const up = uniform(rand, n, -2, 2);
  const R = uniform(rand, n);
  for (const activation of ["silu", "gelu"] as const) {
    const loss = () => dotAt(call(oracle.swiGluForward, { n, activation }, { gate, up, out: new Float64Array(n) }).out, R);
    const grads = () => call(oracle.swiGluBackward, { n, activation }, { gate, up, dOut: R, dGate: new Float64Array(n), dUp: new Float64Array(n) });

    it(`dGate matches finite differences (${activation})`, () => {
      expectGradient("dGate", gate, grads().dGate, loss);
    });

    it(`dUp matches finite differences (${activation})`, () => {
      expectGradient("dUp", up, grads().dUp, loss);
    });
  }
});

forwardKernel("ropeForward", () => {
  const cases = [
    { name: "dense, posOffset 1", batch: 2, seqLen: 3, heads: 2, headDim: 6, theta: 10000, posOffset: 1 },
    { name: "strided rows (q inside packed qkv), theta 500000", batch: 1, seqLen: 4, heads: 2, headDim: 8, theta: 500000, rowStride: 16 * 3 },
  ];
  for (const c of cases) {
    it(`dX matches finite differences: ${c.name}`, () => {
      const { name: _name, ...dims } = c;
      const rand = rng(61);
      const rows = c.batch * c.seqLen, width = c.heads * c.headDim;
      const stride = c.rowStride ?? width;
      const extent = (rows - 1) * stride + width;
      const logical = stridedIndices(rows, width, stride);
      const isLogical = new Set(logical);
      const x = uniform(rand, extent);
      const R = uniform(rand, extent).map((r, i) => (isLogical.has(i) ? r : NaN)); // gaps must not be read
      const loss = () => dotAt(call(oracle.ropeForward, dims, { x, out: new Float64Array(extent) }).out, R, logical);
      const dX = call(oracle.ropeBackward, dims, { x: R, out: new Float64Array(extent).fill(12345) }).out;
      expectGradient("dX", x, dX, loss, logical);
      expect([...dX.keys()].filter((i) => !isLogical.has(i) && dX[i] !== 12345), "gaps written").toEqual([]);
    });
  }
});

forwardKernel("dropout", () => {
  it("dX (the same call on dOut) matches finite differences: the mask is fixed by the seed", () => {
    const n = 37;
    const rand = rng(71);
    const x = uniform(rand, n);
    const R = uniform(rand, n);
    const args = { n, p: 0.3, seed: 4242 };
    const loss = () => dotAt(call(oracle.dropout, args, { x, out: new Float64Array(n) }).out, R);
    expectGradient("dX", x, call(oracle.dropout, args, { x: R, out: new Float64Array(n) }).out, loss);
  });
});

forwardKernel("attentionForward", () => {
  interface AttnCase {
    name: string;
    batch: number;
    seqLen: number;
    heads: number;
    kvHeads: number;
    headDim: number;
    vHeadDim?: number;
    scale?: number;
    /** q, k, v as slices of one (rows, heads headDim + kvHeads (headDim + vHeadDim)) buffer. */
    packed?: boolean;
    /** Extra elements after each row of q / k / v / out (gaps); v's default to k's. */
    gaps?: { q: number; kv: number; v?: number; out: number };
  }
  const cases: AttnCase[] = [
    { name: "dense MHA", batch: 2, seqLen: 5, heads: 2, kvHeads: 2, headDim: 4 },
    { name: "GQA heads 4, kvHeads 2", batch: 1, seqLen: 6, heads: 4, kvHeads: 2, headDim: 4 },
    { name: "MQA heads 3, kvHeads 1, scale 0.3", batch: 2, seqLen: 4, heads: 3, kvHeads: 1, headDim: 2, scale: 0.3 },
    { name: "strided rows with gaps, GQA", batch: 2, seqLen: 4, heads: 4, kvHeads: 2, headDim: 3, gaps: { q: 2, kv: 3, out: 1 } },
    { name: "packed qkv (GPT-2 layout)", batch: 2, seqLen: 4, heads: 2, kvHeads: 2, headDim: 3, packed: true, gaps: { q: 0, kv: 0, out: 2 } },
    { name: "packed qkv with GQA (Llama layout)", batch: 1, seqLen: 5, heads: 4, kvHeads: 2, headDim: 2, packed: true },
    { name: "vHeadDim < headDim, GQA", batch: 2, seqLen: 4, heads: 4, kvHeads: 2, headDim: 5, vHeadDim: 3 },
    { name: "vHeadDim > headDim, k and v rows apart with gaps", batch: 2, seqLen: 4, heads: 2, kvHeads: 1, headDim: 2, vHeadDim: 5, gaps: { q: 1, kv: 2, v: 3, out: 2 } },
    { name: "packed qkv, vHeadDim > headDim", batch: 1, seqLen: 5, heads: 2, kvHeads: 2, headDim: 2, vHeadDim: 3, packed: true },
  ];

  for (const c of cases) {
    describe(c.name, () => {
      const rand = rng(71);
      const { batch: B, seqLen: T, heads: Hq, kvHeads: KH, headDim: D } = c;
      const DV = c.vHeadDim ?? D;
      const rows = B * T;
      const qW = Hq * D, kW = KH * D, vW = KH * DV, outW = Hq * DV;
      const gaps = c.gaps ?? { q: 0, kv: 0, out: 0 };
      const outStride = outW + gaps.out;
      const outExtent = (rows - 1) * outStride + outW;
      const outLogical = stridedIndices(rows, outW, outStride);
      const R = new Float64Array(outExtent).fill(NaN); // dOut: gaps are NaN and must not be read
      for (const i of outLogical) R[i] = rand() * 2 - 1;

      // Inputs: either one packed buffer with three views, or three buffers.
      let qStride: number, kvStride: number, vStride: number;
      let inputs: { buf: Float64Array; logical: number[]; label: string }[];
      let q: Float64Array, k: Float64Array, v: Float64Array;
      let gradBuffers: () => { dQ: Float64Array; dK: Float64Array; dV: Float64Array; all: Float64Array[] };
      if (c.packed) {
        qStride = kvStride = vStride = qW + kW + vW;
        const qkv = uniform(rand, rows * qStride, -1.5, 1.5);
        q = qkv.subarray(0);
        k = qkv.subarray(qW);
        v = qkv.subarray(qW + kW);
        inputs = [{ buf: qkv, logical: [...qkv.keys()], label: "dQKV" }];
        gradBuffers = () => {
          const d = new Float64Array(rows * qStride).fill(12345);
          return { dQ: d.subarray(0), dK: d.subarray(qW), dV: d.subarray(qW + kW), all: [d] };
        };
      } else {
        qStride = qW + gaps.q;
        kvStride = kW + gaps.kv;
        vStride = vW + (gaps.v ?? gaps.kv);
        const qExt = (rows - 1) * qStride + qW, kExt = (rows - 1) * kvStride + kW, vExt = (rows - 1) * vStride + vW;
        const qLogical = stridedIndices(rows, qW, qStride), kLogical = stridedIndices(rows, kW, kvStride), vLogical = stridedIndices(rows, vW, vStride);
        const withNaNGaps = (ext: number, logical: number[]) => {
          const b = new Float64Array(ext).fill(NaN);
          for (const i of logical) b[i] = rand() * 3 - 1.5;
          return b;
        };
        q = withNaNGaps(qExt, qLogical);
        k = withNaNGaps(kExt, kLogical);
        v = withNaNGaps(vExt, vLogical);
        inputs = [
          { buf: q, logical: qLogical, label: "dQ" },
          { buf: k, logical: kLogical, label: "dK" },
          { buf: v, logical: vLogical, label: "dV" },
        ];
        gradBuffers = () => {
          const dQ = new Float64Array(qExt).fill(12345), dK = new Float64Array(kExt).fill(12345), dV = new Float64Array(vExt).fill(12345);
          return { dQ, dK, dV, all: [dQ, dK, dV] };
        };
      }
      const dims = {
        batch: B, seqLen: T, heads: Hq, kvHeads: KH, headDim: D, vHeadDim: c.vHeadDim, scale: c.scale,
        qRowStride: qStride, kvRowStride: kvStride, vRowStride: vStride, outRowStride: outStride,
      };
      const forward = () => call(oracle.attentionForward, dims, { q, k, v, out: new Float64Array(outExtent), lse: new Float64Array(B * Hq * T) });
      const loss = () => dotAt(forward().out, R, outLogical);
      const backward = () => {
        const f = forward();
        const g = gradBuffers();
        call(oracle.attentionBackward, dims, { dOut: R, q, k, v, out: f.out, lse: f.lse, dQ: g.dQ, dK: g.dK, dV: g.dV });
        return g.all;
      };

      it("forward output is finite (gaps of the inputs are not read)", () => {
        const out = forward().out;
        expect(outLogical.filter((i) => !Number.isFinite(out[i]))).toEqual([]);
      });

      it("dQ, dK, dV match finite differences", () => {
        const grads = backward();
        inputs.forEach((inp, j) => expectGradient(inp.label, inp.buf, grads[j], loss, inp.logical));
      });

      if (!c.packed && gaps.q + gaps.kv > 0) it("leaves the gaps of dQ, dK, dV untouched", () => {
        const grads = backward();
        inputs.forEach((inp, j) => {
          const logical = new Set(inp.logical);
          const touched = [...grads[j].keys()].filter((i) => !logical.has(i) && grads[j][i] !== 12345);
          expect(touched, inp.label).toEqual([]);
        });
      });
    });
  }
});

forwardKernel("crossEntropyForward", () => {
  const rows = 5, vocab = 7, lossScale = 0.37;
  const rand = rng(81);
  const logits = uniform(rand, rows * vocab, -3, 3);
  const targets = Float64Array.from([2, -1, 6, 0, 2]);
  const loss = () => {
    const v = call(oracle.crossEntropyForward, { rows, vocab }, { logits, targets, losses: new Float64Array(rows), lse: new Float64Array(rows) });
    let s = 0;
    for (let r = 0; r < rows; r++) if (targets[r] >= 0) s += v.losses[r];
    return lossScale * s;
  };
  const backward = () => {
    const f = call(oracle.crossEntropyForward, { rows, vocab }, { logits, targets, losses: new Float64Array(rows), lse: new Float64Array(rows) });
    return call(
      oracle.crossEntropyBackward,
      { rows, vocab, lossScale },
      { logits, targets, lse: f.lse, dLogits: new Float64Array(rows * vocab).fill(9) },
    ).dLogits;
  };

  it("dLogits matches finite differences of lossScale * sum(losses), ignored rows zero", () => {
    const dLogits = backward();
    expectGradient("dLogits", logits, dLogits, loss);
    expect(Array.from(dLogits.subarray(vocab, 2 * vocab))).toEqual(new Array(vocab).fill(0));
  });
});

forwardKernel("matmul", () => {
  interface MatmulGrads {
    dA: Float64Array;
    dB: Float64Array;
    dBias: Float64Array;
  }

  /**
   * Gradients of C = alpha op(A) op(B) + bias with dC given, through the oracle itself:
   * dA = alpha dC op(B)^T and dB = alpha op(A)^T dC stored in A's and B's layouts, dBias = sumRows(dC).
   * With broadcastB (strideB 0), dB sums over the batch items.
   */
  function matmulGrads(
    dims: { m: number; n: number; k: number; batch: number; transA: boolean; transB: boolean; alpha: number; broadcastB: boolean },
    A: Float64Array,
    B: Float64Array,
    dC: Float64Array,
  ): MatmulGrads {
    const { m, n, k, batch, transA, transB, alpha, broadcastB } = dims;
    const dA = new Float64Array(A.length);
    const dB = new Float64Array(B.length);
    // dA (m x k) = dC (m x n) op(B)^T;  stored transposed when transA: dA^T = op(B) dC^T.
    if (!transA) {
      call(oracle.matmul, { m, n: k, k: n, batch, transA: false, transB: !transB, alpha, strideB: broadcastB ? 0 : undefined }, { a: dC, b: B, c: dA });
    } else {
      call(oracle.matmul, { m: k, n: m, k: n, batch, transA: transB, transB: true, alpha, strideA: broadcastB ? 0 : undefined }, { a: B, b: dC, c: dA });
    }
    // dB (k x n) = op(A)^T dC;  stored transposed when transB: dB^T = dC^T op(A).
    const items = broadcastB ? batch : 1;
    const perCall = broadcastB ? 1 : batch;
    for (let i = 0; i < items; i++) {
      const Ai = A.subarray(i * m * k), dCi = dC.subarray(i * m * n);
      const acc = { batch: perCall, alpha, accumulate: broadcastB };
      if (!transB) call(oracle.matmul, { ...acc, m: k, n, k: m, transA: !transA, transB: false }, { a: Ai, b: dCi, c: dB });
      else call(oracle.matmul, { ...acc, m: n, n: k, k: m, transA: true, transB: transA }, { a: dCi, b: Ai, c: dB });
    }
    const dBias = call(oracle.sumRows, { rows: batch * m, cols: n }, { x: dC, out: new Float64Array(n) }).out;
    return { dA, dB, dBias };
  }

  const cases: { transA: boolean; transB: boolean; alpha: number; broadcastB: boolean; batch: number }[] = [];
  for (const transA of [false, true]) for (const transB of [false, true]) cases.push({ transA, transB, alpha: 1, broadcastB: false, batch: 2 });
  cases.push({ transA: false, transB: true, alpha: 0.7, broadcastB: false, batch: 1 });
  for (const transA of [false, true]) for (const transB of [false, true]) cases.push({ transA, transB, alpha: 1, broadcastB: true, batch: 3 });

  for (const c of cases) {
    const label = `transA=${c.transA} transB=${c.transB} alpha=${c.alpha} batch=${c.batch}${c.broadcastB ? " (B broadcast)" : ""}`;
    it(`dA, dB (matmul with transposes) and dBias (sumRows) match finite differences: ${label}`, () => {
      const m = 3, k = 4, n = 5;
      const rand = rng(91);
      const A = uniform(rand, c.batch * m * k);
      const B = uniform(rand, (c.broadcastB ? 1 : c.batch) * k * n);
      const bias = uniform(rand, n);
      const R = uniform(rand, c.batch * m * n);
      const fdims = { m, n, k, batch: c.batch, transA: c.transA, transB: c.transB, alpha: c.alpha, strideB: c.broadcastB ? 0 : undefined };
      const loss = () => dotAt(call(oracle.matmul, fdims, { a: A, b: B, bias, c: new Float64Array(c.batch * m * n) }).c, R);
      const g = matmulGrads({ m, n, k, ...c }, A, B, R);
      expectGradient("dA", A, g.dA, loss);
      expectGradient("dB", B, g.dB, loss);
      expectGradient("dBias", bias, g.dBias, loss);
    });
  }
});

forwardKernel("moeRoute", () => {
  // The loss reads the routing weights (through R) and the load-balancing loss; the choice of
  // experts is piecewise constant, so a small step in the logits never changes it here.
  const tokens = 6, numExperts = 5, topK = 2, alpha = 0.3, auxScale = 0.7;
  const rand = rng(71);
  const logits = uniform(rand, tokens * numExperts, -2, 2);
  const R = uniform(rand, tokens * topK);
  const dims = { tokens, numExperts, topK, alpha };
  const route = () =>
    call(oracle.moeRoute, dims, {
      logits,
      probs: new Float64Array(tokens * numExperts),
      experts: new Float64Array(tokens * topK),
      weights: new Float64Array(tokens * topK),
      offsets: new Float64Array(numExperts + 1),
      slots: new Float64Array(tokens * topK),
      auxLoss: new Float64Array(1),
    });
  const loss = () => {
    const v = route();
    return dotAt(v.weights, R) + auxScale * v.auxLoss[0];
  };

  it("dLogits matches finite differences of the weights and the auxiliary loss", () => {
    const v = route();
    const d = call(oracle.moeRouteBackward, { ...dims, auxScale }, { ...v, dWeights: R, dLogits: new Float64Array(tokens * numExperts) });
    expectGradient("dLogits", logits, d.dLogits, loss);
  });

  it("routes each expert's assignments to consecutive slots in token order", () => {
    const v = route();
    expect([...v.slots].sort((x, y) => x - y)).toEqual([...Array(tokens * topK).keys()]);
    for (let t = 0; t < tokens; t++) expect(v.experts[t * topK]).not.toBe(v.experts[t * topK + 1]);
    for (let i = 0; i < tokens * topK; i++) {
      const e = v.experts[i];
      expect(v.slots[i]).toBeGreaterThanOrEqual(v.offsets[e]);
      expect(v.slots[i]).toBeLessThan(v.offsets[e + 1]);
    }
  });
});

forwardKernel("moeDispatch", () => {
  const tokens = 5, topK = 3, dim = 4;
  const rand = rng(72);
  const slots = Float64Array.from([7, 2, 12, 0, 9, 4, 14, 1, 11, 5, 3, 13, 8, 6, 10]);
  const x = uniform(rand, tokens * dim);
  const scale = uniform(rand, tokens * topK, 0.2, 1);
  const R = uniform(rand, tokens * topK * dim);
  const dims = { tokens, topK, dim };
  const loss = () => dotAt(call(oracle.moeDispatch, dims, { x, slots, scale, out: new Float64Array(tokens * topK * dim) }).out, R);

  it("moeCombine of dOut with the same scale is dX", () => {
    const dX = call(oracle.moeCombine, dims, { x: R, slots, scale, out: new Float64Array(tokens * dim) }).out;
    expectGradient("dX", x, dX, loss);
  });

  it("moeCombine with accumulate adds onto out", () => {
    const start = uniform(rand, tokens * dim);
    const fresh = call(oracle.moeCombine, dims, { x: R, slots, scale, out: new Float64Array(tokens * dim) }).out;
    expectAccumulated(call(oracle.moeCombine, { ...dims, accumulate: true }, { x: R, slots, scale, out: start.slice() }).out, start, fresh);
  });
});

forwardKernel("moeCombine", () => {
  const tokens = 5, topK = 2, dim = 4;
  const rand = rng(73);
  const slots = Float64Array.from([3, 8, 0, 5, 9, 1, 6, 2, 4, 7]);
  const x = uniform(rand, tokens * topK * dim);
  const scale = uniform(rand, tokens * topK, 0.2, 1);
  const R = uniform(rand, tokens * dim);
  const dims = { tokens, topK, dim };
  const loss = () => dotAt(call(oracle.moeCombine, dims, { x, slots, scale, out: new Float64Array(tokens * dim) }).out, R);

  it("moeDispatch of dOut with the same scale is dX", () => {
    const dX = call(oracle.moeDispatch, dims, { x: R, slots, scale, out: new Float64Array(tokens * topK * dim) }).out;
    expectGradient("dX", x, dX, loss);
  });

  it("moeCombineScaleGrad is dScale", () => {
    const dScale = call(oracle.moeCombineScaleGrad, dims, { dOut: R, x, slots, dScale: new Float64Array(tokens * topK) }).dScale;
    expectGradient("dScale", scale, dScale, loss);
  });
});

forwardKernel("groupedMatmul", () => {
  const rows = 9, n = 4, k = 3, groups = 4;
  const rand = rng(74);
  const offsets = Float64Array.from([0, 2, 2, 7, 9]); // group 1 empty
  const a = uniform(rand, rows * k);
  const b = uniform(rand, groups * n * k);
  const R = uniform(rand, rows * n);
  const dims = { rows, n, k, groups, transB: true };
  const loss = () => dotAt(call(oracle.groupedMatmul, dims, { a, b, offsets, c: new Float64Array(rows * n) }).c, R);

  it("groupedMatmul of dC with B untransposed is dA", () => {
    const dA = call(oracle.groupedMatmul, { rows, n: k, k: n, groups }, { a: R, b, offsets, c: new Float64Array(rows * k) }).c;
    expectGradient("dA", a, dA, loss);
  });

  it("groupedMatmulWeightGrad is dB (an empty group's stays zero) and accumulates", () => {
    const dB = call(oracle.groupedMatmulWeightGrad, { rows, n, k, groups }, { a, dC: R, offsets, dB: new Float64Array(groups * n * k) }).dB;
    expectGradient("dB", b, dB, loss);
    expect(maxAbs(dB.subarray(n * k, 2 * n * k))).toBe(0);
    const start = uniform(rand, groups * n * k);
    expectAccumulated(call(oracle.groupedMatmulWeightGrad, { rows, n, k, groups }, { a, dC: R, offsets, dB: start.slice() }).dB, start, dB);
  });
});
