import { describe, expect, it } from "vitest";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";

const BENCH = {
  "bench-tiny": { vocabSize: 4096, hiddenSize: 256, numLayers: 4, numHeads: 4, seqLen: 128 },
  "bench-small": { vocabSize: 8192, hiddenSize: 384, numLayers: 6, numHeads: 6, seqLen: 256 },
} as const;

describe("the memory plan is what the wasm backend measures", () => {
  for (const [name, c] of Object.entries(BENCH)) {
    it(`${name}: planned peak within 2% of the measured peak; steady-state steps allocate nothing`, async () => {
      const backend = await createWasmBackend({ threads: 2, measurePeak: false });
      const model = resolveModelConfig({ arch: "gpt2", vocabSize: c.vocabSize, hiddenSize: c.hiddenSize, numLayers: c.numLayers, numHeads: c.numHeads, maxSeqLen: c.seqLen });
      const trainer = new Trainer(backend, {
        model,
        batchSize: 8,
        seqLen: c.seqLen,
        optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
        schedule: { kind: "constant", peak: 1e-4, min: 1e-4, warmupSteps: 0, maxSteps: 10 },
        seed: 1,
      });
      const n = 8 * c.seqLen;
      const batch = { ids: Int32Array.from({ length: n }, (_, i) => (i * 31) % c.vocabSize), targets: Int32Array.from({ length: n }, (_, i) => (i * 17 + 3) % c.vocabSize) };
      await trainer.step([batch]);
      const before = backend.memoryStats();
      await trainer.step([batch]);
      const after = backend.memoryStats();
      expect(after.allocCalls).toBe(before.allocCalls);
      const planned = trainer.memoryPlan.total;
      expect(Math.abs(after.peakBytes - planned) / planned).toBeLessThan(0.02);
      trainer.dispose();
      backend.dispose();
    }, 120_000);
  }
});
