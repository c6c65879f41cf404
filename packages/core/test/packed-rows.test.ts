import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Backend, ConfigError, createReferenceBackend } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { type Batch, Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { loadFixture } from "./support/pytorch-fixture.js";
import { maxAbsDiff } from "./support/data-parallel-batches.js";

// Packed rows (trainer.pack): documents one after another in a row, attention and positions
// kept inside each by the kernels' docStarts, must train exactly as the same documents each
// in a row of its own (the path the PyTorch fixtures check): the same loss over the same
// targets, the same gradients.
const SEQ = 24;
const DOCS = [9, 6, 5]; // positions each document takes; 4 left over as padding

let wasm: Backend;
beforeAll(async () => {
  wasm = await createWasmBackend({ threads: 2, measurePeak: false });
});
afterAll(() => wasm?.dispose());

function documents(vocab: number): { ids: number[]; targets: number[] }[] {
  return DOCS.map((n, d) => ({
    ids: Array.from({ length: n }, (_, j) => (d * 31 + j * 17 + 3) % vocab),
    // Some targets ignored, as a loss mask leaves prompts out.
    targets: Array.from({ length: n }, (_, j) => (j === 1 ? -1 : (d * 7 + j * 13 + 5) % vocab)),
  }));
}

/** The documents packed into one row of SEQ positions, with their starts. */
function packedBatch(vocab: number, withStarts = true): Batch {
  const ids = new Int32Array(SEQ);
  const targets = new Int32Array(SEQ).fill(-1);
  const docStarts = new Int32Array(SEQ);
  let at = 0;
  for (const doc of documents(vocab)) {
    ids.set(doc.ids, at);
    targets.set(doc.targets, at);
    docStarts.fill(at, at, at + doc.ids.length);
    at += doc.ids.length;
  }
  docStarts.fill(at, at);
  return withStarts ? { ids, targets, docStarts } : { ids, targets };
}

/** Each document in a row of its own, padded. */
function separateBatch(vocab: number): Batch {
  const docs = documents(vocab);
  const ids = new Int32Array(docs.length * SEQ);
  const targets = new Int32Array(docs.length * SEQ).fill(-1);
  docs.forEach((doc, r) => {
    ids.set(doc.ids, r * SEQ);
    targets.set(doc.targets, r * SEQ);
  });
  return { ids, targets };
}

describe.each([
  ["llama-tiny", "rotary positions"],
  ["gpt2-tiny", "learned positions"],
] as const)("packed rows, %s (%s)", (fixture) => {
  const backends: [string, () => Backend][] = [
    ["wasm", () => wasm],
    ["reference", () => createReferenceBackend()],
    ...(cudaStatus().simulator.built ? ([["cuda-sim", () => createCudaSimBackend()]] as [string, () => Backend][]) : []),
  ];
  for (const [name, make] of backends) {
    it(`${name}: one packed row trains as its documents each in a row of their own: loss and every gradient`, async () => {
      const backend = make();
      const f = await loadFixture(fixture);
      const config: TrainerConfig = {
        model: { ...f.config, maxSeqLen: Math.max(f.config.maxSeqLen, SEQ) },
        batchSize: 1,
        seqLen: SEQ,
        optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
        schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 1 },
        seed: 3,
      };
      const packed = new Trainer(backend, { ...config, packed: true });
      const separate = new Trainer(backend, { ...config, batchSize: DOCS.length });
      const vocab = f.config.vocabSize;
      const a = await packed.lossAndGradients(packedBatch(vocab));
      const b = await separate.lossAndGradients(separateBatch(vocab));
      expect(Math.abs(a - b) / b).toBeLessThan(1e-6);
      const [ga, gb] = [await packed.readParameters("grads"), await separate.readParameters("grads")];
      expect(maxAbsDiff(ga, gb)).toBeLessThan(2e-6);
      // The same row without its document starts lets attention cross documents: another loss.
      const plain = new Trainer(backend, config);
      const crossed = await plain.lossAndGradients(packedBatch(vocab, false));
      expect(Math.abs(crossed - b) / b).toBeGreaterThan(1e-4);
      // A packed trainer's validation runner takes the starts too.
      const runner = packed.forwardRunner(1, SEQ);
      const batch = packedBatch(vocab);
      const sum = await runner.run(batch.ids, batch.targets, batch.docStarts);
      expect(Math.abs(sum / batch.targets.filter((t) => t >= 0).length - a) / a).toBeLessThan(1e-5);
      await expect(runner.run(batch.ids, batch.targets)).rejects.toThrow(/packed rows runs on batches with docStarts/);
      for (const t of [packed, separate, plain]) t.dispose();
      if (backend !== wasm) backend.dispose();
    });
  }
});

describe("packed rows and Mamba layers", () => {
  it("are refused, naming trainer.pack: a Mamba layer's state would carry one example into the next", async () => {
    const f = await loadFixture("llama-hybrid-tiny");
    const make = () =>
      new Trainer(wasm, {
        model: f.config,
        batchSize: 1,
        seqLen: 8,
        optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
        schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 1 },
        seed: 3,
        packed: true,
      });
    expect(make).toThrow(ConfigError);
    expect(make).toThrow(/packing examples into rows needs a model of attention layers alone/);
  });
});
