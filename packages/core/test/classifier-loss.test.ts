import { describe, expect, it } from "vitest";
import { seededRandom } from "@kiln/contract/conformance";
import { appendBackward } from "../src/autodiff/append-backward.js";
import { Graph } from "../src/graph/graph.js";
import { GPU_LOGITS_CHUNK_BYTES, chunkedClassifierLoss, logitsChunkRows } from "../src/ops/classifier-loss.js";
import { crossEntropyLoss, linear } from "../src/ops/index.js";
import { buildTrainingGraph } from "../src/model/build-graph.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { paramLayout } from "../src/model/param-layout.js";
import { runF64 } from "./support/f64-interpreter.js";

const ROWS = 7, WIDTH = 5, VOCAB = 11;

/** hidden = x·w^T (ROWS, WIDTH) -> logits -> loss: d(hidden) reaches w through the ordinary backward pass. */
function lossGraph(chunkRows: number | undefined, vocabMultiple = 1) {
  const g = new Graph();
  const x = g.tensor([ROWS, WIDTH], "f32", "param", "x");
  const w = g.tensor([WIDTH, WIDTH], "f32", "param", "w");
  const head = g.tensor([VOCAB, WIDTH], "f32", "param", "head");
  const targets = g.tensor([ROWS], "i32", "input", "targets");
  const hidden = linear(g, x, w, undefined, "out_in", "hidden");
  if (chunkRows === undefined) {
    const { lossSum, lossNode } = crossEntropyLoss(g, linear(g, hidden, head, undefined, "out_in", "logits"), targets, "loss");
    return { g, x, w, head, targets, lossSum, ...appendBackward(g, { lossNode }) };
  }
  const before = g.nodes.length;
  const { lossSum, dHidden, headGrad } = chunkedClassifierLoss(g, hidden, head, targets, "loss", chunkRows, undefined, vocabMultiple);
  return { g, x, w, head, targets, lossSum, ...appendBackward(g, { before, grads: new Map([[hidden, dHidden]]), paramGrads: new Map([[head, headGrad]]) }) };
}

describe("the training loss by row chunks", () => {
  it("gives the loss and every gradient of the whole-logits formulation, chunks of 3 + 3 + 1 rows, one target ignored", () => {
    const rand = seededRandom(5);
    const inputs = new Map<string, Float64Array>([
      ["x", Float64Array.from({ length: ROWS * WIDTH }, () => rand() * 2 - 1)],
      ["w", Float64Array.from({ length: WIDTH * WIDTH }, () => rand() * 2 - 1)],
      ["head", Float64Array.from({ length: VOCAB * WIDTH }, () => rand() * 2 - 1)],
    ]);
    const targets = Float64Array.from({ length: ROWS }, (_, i) => (i === 4 ? -1 : (i * 3) % VOCAB));
    const run = (chunkRows: number | undefined, vocabMultiple = 1) => {
      const r = lossGraph(chunkRows, vocabMultiple);
      const storage = new Map<number, Float64Array>([[r.x, inputs.get("x")!.slice()], [r.w, inputs.get("w")!.slice()], [r.head, inputs.get("head")!.slice()], [r.targets, targets]]);
      runF64(r.g, storage, { lossScale: 0.5 });
      return { loss: storage.get(r.lossSum)![0], grads: [r.w, r.head].map((p) => storage.get(r.paramGrads.get(p)!)!) };
    };
    const whole = run(undefined);
    const chunked = run(3);
    expect(chunked.loss).toBeCloseTo(whole.loss, 12);
    chunked.grads.forEach((grad, i) => grad.forEach((v, j) => expect(v, `${["w", "head"][i]}[${j}]`).toBeCloseTo(whole.grads[i][j], 12)));
    for (const grad of whole.grads) expect(Math.max(...grad.map(Math.abs))).toBeGreaterThan(1e-3);
    // The vocabulary padded to 16 (as a GPU pads to 128): the same loss and gradients, the head's exactly its size.
    const padded = run(3, 8);
    expect(padded.loss).toBeCloseTo(whole.loss, 12);
    expect(padded.grads[1].length).toBe(VOCAB * WIDTH);
    padded.grads.forEach((grad, i) => grad.forEach((v, j) => expect(v, `padded ${["w", "head"][i]}[${j}]`).toBeCloseTo(whole.grads[i][j], 12)));
  });

  it("pads the forward product's vocabulary with zero weight rows and a lowest-value bias; the backward products read the padded gradient's real columns", () => {
    const { g } = lossGraph(3, 8);
    const calls = g.nodes.map((n) => n.attrs as unknown as { kernel: string; args: Record<string, number | boolean> });
    const matmuls = calls.filter((c) => c.kernel === "matmul" && c.args.m !== ROWS);
    // Per chunk: logits (n = 16, the padded copy of the head), d(hidden) (k = 11 from the head itself, dLogits rows 16 apart),
    // the head's gradient (m = 11, dLogits rows 16 apart) added straight into the parameter's.
    const shape = (c: (typeof calls)[number]) => [c.args.n, c.args.k, c.args.lda ?? "-", c.args.m === VOCAB ? "grad" : ""].join(" ");
    expect(matmuls.slice(0, 3).map(shape)).toEqual(["16 5 - ", "5 11 16 ", "5 3 16 grad"]);
    expect(matmuls.filter((c) => c.args.m === VOCAB).map((c) => c.args.accumulate)).toEqual([true, true, true]);
    expect(calls.filter((c) => c.kernel === "crossEntropyForward").map((c) => c.args.vocab)).toEqual([16, 16, 16]);
    expect(calls.filter((c) => c.kernel === "fill").map((c) => [c.args.n, c.args.value])).toEqual([[5 * 5, 0], [11, 0], [5, -3.4028234663852886e38]]);
    // No padded gradient block, and so no add of it into the head's gradient.
    expect(calls.filter((c) => c.kernel === "add")).toEqual([]);
    expect(g.tensors.filter((t) => t.name.includes("head_padded")).map((t) => t.name)).toEqual(["loss.head_padded"]);
  });

  it("never holds the whole logits in a training graph, and keeps chunks of at least 256 rows", () => {
    const c = resolveModelConfig({ arch: "gpt2", vocabSize: 8192, hiddenSize: 64, numLayers: 1, numHeads: 2, maxSeqLen: 256 });
    const { graph } = buildTrainingGraph(c, paramLayout(c), 8, 256);
    const logits = graph.tensors.filter((t) => t.shape.length === 2 && t.shape[1] === 8192).map((t) => t.shape[0]);
    expect(new Set(logits)).toEqual(new Set([512]));
    expect(logitsChunkRows(2048, 8192, 4)).toBe(512);
    expect(logitsChunkRows(2048, 50257, 4)).toBe(256);
    expect(logitsChunkRows(16, 50257, 4)).toBe(16);
  });

  it("shares the rows out evenly between as many chunks as the limit needs", () => {
    // 1000 rows at most 256 a chunk: four chunks of 250, not 256 x 3 + 232.
    expect(logitsChunkRows(1000, 50257, 4)).toBe(250);
    expect(logitsChunkRows(1025, 8192, 4)).toBe(342);
    for (const [rows, vocab, bytes] of [[1000, 50257, 4], [8192, 50257, 2], [777, 3000, 4], [300, 50257, 2]]) {
      const chunk = logitsChunkRows(rows, vocab, bytes);
      const chunks = Math.ceil(rows / chunk);
      expect(chunk * vocab * bytes <= 16 * 2 ** 20 || chunk <= 256, `${rows} rows`).toBe(true);
      expect(rows - (chunks - 1) * chunk).toBeGreaterThan(chunk - chunks);
    }
  });

  it("takes larger chunks on a GPU: gpt2-small's 8192 rows in one chunk of bf16 logits, not 32", () => {
    expect(logitsChunkRows(8192, 50257, 2)).toBe(256);
    expect(logitsChunkRows(8192, 50257, 2, GPU_LOGITS_CHUNK_BYTES)).toBe(8192);
    expect(logitsChunkRows(8192, 50257, 4, GPU_LOGITS_CHUNK_BYTES)).toBe(4096);
    const c = resolveModelConfig({ arch: "gpt2", vocabSize: 50257, hiddenSize: 64, numLayers: 1, numHeads: 2, maxSeqLen: 1024 });
    const chunkShapes = (device: "cpu" | "gpu", lossChunkBytes?: number) => {
      const { graph } = buildTrainingGraph(c, paramLayout(c, "bf16"), 8, 1024, "cheap", device, lossChunkBytes);
      return graph.tensors.filter((t) => t.shape.length === 2 && t.name.startsWith("loss.logits")).map((t) => t.shape.join("x"));
    };
    expect(chunkShapes("cpu")).toEqual(Array(32).fill("256x50257"));
    // A GPU pads the vocabulary to 50304 (a multiple of 128: aligned rows for the products).
    expect(chunkShapes("gpu")).toEqual(["8192x50304"]);
    // A chosen chunk size replaces the device's: 256 MiB, 4 chunks of 2048 rows.
    expect(chunkShapes("gpu", 256 * 2 ** 20)).toEqual(Array(4).fill("2048x50304"));
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => chunkShapes("gpu", bad), String(bad)).toThrow(/lossChunkBytes .* is not a positive whole number of bytes/);
  });
});
