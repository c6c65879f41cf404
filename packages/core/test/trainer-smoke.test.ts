import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { Trainer } from "../src/train/trainer.js";
import { resolveModelConfig } from "../src/model/architectures.js";

const tiny = (arch: "gpt2" | "llama") =>
  resolveModelConfig({ arch, vocabSize: 32, hiddenSize: 16, numLayers: 2, numHeads: 2, maxSeqLen: 8, ...(arch === "llama" ? { kvHeads: 1, intermediateSize: 24 } : {}) });

function batch(seed: number, n: number, vocab: number) {
  const ids = new Int32Array(n);
  const targets = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    ids[i] = (i * 7 + seed) % vocab;
    targets[i] = (i * 7 + seed + 1) % vocab;
  }
  return { ids, targets };
}

describe.each(["gpt2", "llama"] as const)("%s trainer on the reference backend", (arch) => {
  it("starts near log(vocab) and learns a fixed batch", async () => {
    const backend = createReferenceBackend();
    const trainer = new Trainer(backend, {
      model: tiny(arch),
      batchSize: 2,
      seqLen: 8,
      optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
      schedule: { kind: "constant", peak: 1e-2, min: 1e-2, warmupSteps: 0, maxSteps: 100 },
      seed: 1,
    });
    const b = batch(3, 16, 32);
    const first = await trainer.step([b]);
    expect(first.loss).toBeGreaterThan(Math.log(32) - 0.3);
    expect(first.loss).toBeLessThan(Math.log(32) + 0.3);
    let last = first;
    for (let i = 0; i < 30; i++) last = await trainer.step([b]);
    expect(last.loss).toBeLessThan(first.loss * 0.5);
    expect(backend.memoryStats().peakBytes).toBe(trainer.memoryPlan.total);
  });
});
