import { describe, expect, it } from "vitest";
import { seededRandom } from "@kiln/contract/conformance";
import { Graph } from "../src/graph/graph.js";
import { appendBackward } from "../src/autodiff/append-backward.js";
import { rematerialize } from "../src/autodiff/rematerialize.js";
import { add, attention, crossEntropyLoss, gelu, layerNorm, linear, rmsNorm, rope, swiGlu } from "../src/ops/index.js";
import { runF64 } from "./support/f64-interpreter.js";

const ROWS = 6; // batch 2 x seqLen 3
const DIM = 8;
const VOCAB = 5;

/** A random differentiable graph over (ROWS, DIM) activations ending in a cross-entropy loss. */
function randomGraph(seed: number) {
  const rand = seededRandom(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
  const g = new Graph();
  let params = 0;
  const param = (shape: number[]) => g.tensor(shape, "f32", "param", `p${params++}`);
  const x0 = param([ROWS, DIM]); // treated as a parameter so its gradient is checked too
  const live: number[] = [x0];
  const ops: string[] = [];
  for (let i = 0; i < 6; i++) {
    const x = pick(live);
    const op = pick(["linear", "add", "gelu", "layerNorm", "rmsNorm", "swiGlu", "rope", "attention"]);
    ops.push(op);
    let y: number;
    switch (op) {
      case "linear": {
        const layout = pick(["out_in", "in_out"] as const);
        y = linear(g, x, param([DIM, DIM]), rand() < 0.5 ? param([DIM]) : undefined, layout, `lin${i}`);
        break;
      }
      case "add":
        y = add(g, x, pick(live), `add${i}`);
        break;
      case "gelu":
        y = gelu(g, x, `gelu${i}`);
        break;
      case "layerNorm":
        y = layerNorm(g, x, param([DIM]), rand() < 0.5 ? param([DIM]) : undefined, 1e-5, `ln${i}`);
        break;
      case "rmsNorm":
        y = rmsNorm(g, x, param([DIM]), 1e-6, `rms${i}`);
        break;
      case "swiGlu":
        y = swiGlu(g, x, pick(live), `swiglu${i}`);
        break;
      case "rope":
        y = rope(g, x, { batch: 2, seqLen: 3, heads: 2, headDim: 4, theta: 100 }, `rope${i}`);
        break;
      default: {
        // Llama-style separate q, k, v with GQA (2 query heads share 1 kv head).
        const k = linear(g, x, param([4, DIM]), undefined, "out_in", `k${i}`);
        const v = linear(g, pick(live), param([4, DIM]), undefined, "out_in", `v${i}`);
        y = attention(g, { id: x }, { id: k }, { id: v }, { batch: 2, seqLen: 3, heads: 2, kvHeads: 1, headDim: 4 }, {}, `attn${i}`);
      }
    }
    live.push(y);
  }
  const logits = linear(g, live[live.length - 1], param([VOCAB, DIM]), undefined, "out_in", "logits");
  const targets = g.tensor([ROWS], "i32", "input", "targets");
  const { lossSum, lossNode } = crossEntropyLoss(g, logits, targets, "loss");
  const forwardNodes = g.nodes.length;
  const { paramGrads } = appendBackward(g, { lossNode });
  // Odd seeds also recompute GELU / norm / SwiGLU outputs in the backward pass.
  if (seed % 2 === 1) rematerialize(g, "cheap", "model.layers");
  // Initial values: params N(0, 0.5^2)-ish uniform, targets in range.
  const storage = new Map<number, Float64Array>();
  for (const t of g.tensors) {
    if (t.kind === "param") storage.set(t.id, Float64Array.from({ length: g.elements(t.id) }, () => (rand() - 0.5) * 1.5 + (t.shape.length === 1 ? 1 : 0)));
  }
  storage.set(targets, Float64Array.from({ length: ROWS }, () => Math.floor(rand() * VOCAB)));
  return { g, storage, lossSum, forwardNodes, paramGrads, ops };
}

describe("autodiff against finite differences on random graphs (float64 oracle execution)", () => {
  for (let seed = 1; seed <= 40; seed++) {
    it(`graph ${seed}`, () => {
      const { g, storage, lossSum, forwardNodes, paramGrads, ops } = randomGraph(seed);
      const runtime = { lossScale: 1 };
      const lossAt = () => {
        const s = new Map([...storage].filter(([id]) => g.info(id).kind === "param" || g.info(id).kind === "input"));
        runF64(g, s, runtime, forwardNodes);
        return s.get(lossSum)![0];
      };
      runF64(g, storage, runtime);
      const rand = seededRandom(seed * 977);
      let checked = 0;
      for (const [param, grad] of paramGrads) {
        const values = storage.get(param)!;
        const analytic = storage.get(grad)!;
        for (let probe = 0; probe < 3; probe++) {
          const i = Math.floor(rand() * values.length);
          const h = 1e-6;
          const saved = values[i];
          values[i] = saved + h;
          const up = lossAt();
          values[i] = saved - h;
          const down = lossAt();
          values[i] = saved;
          const numeric = (up - down) / (2 * h);
          expect(Math.abs(analytic[i] - numeric), `${ops.join(" -> ")}: ${g.info(param).name}[${i}] analytic ${analytic[i]} numeric ${numeric}`).toBeLessThan(1e-6 + 1e-5 * Math.abs(numeric));
          checked++;
        }
      }
      expect(checked).toBeGreaterThanOrEqual(3);
    });
  }
});
