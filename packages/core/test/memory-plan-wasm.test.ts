import { describe, expect, it } from "vitest";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { resolveModelConfig } from "../src/model/architectures.js";
import type { ModelConfigInput } from "../src/model/config.js";
import { Trainer } from "../src/train/trainer.js";
import { planForwardMemory } from "../src/train/plan-training.js";

const BENCH: Record<string, ModelConfigInput & { seqLen: number }> = {
  "bench-tiny": { arch: "gpt2", vocabSize: 4096, hiddenSize: 256, numLayers: 4, numHeads: 4, maxSeqLen: 128, seqLen: 128 },
  "bench-small": { arch: "gpt2", vocabSize: 8192, hiddenSize: 384, numLayers: 6, numHeads: 6, maxSeqLen: 256, seqLen: 256 },
  // Mixture of experts: routing tables (i32) and expert-sorted rows in the arena too.
  "llama-moe": { arch: "llama", vocabSize: 4096, hiddenSize: 256, numLayers: 3, numHeads: 4, kvHeads: 2, maxSeqLen: 128, seqLen: 128, intermediateSize: 192, numExperts: 6, expertsPerToken: 2, sharedExpert: true },
  // Multi-head latent attention: per-head slots assembled and gathered by copies, zero-filled keys.
  "llama-mla": { arch: "llama", vocabSize: 4096, hiddenSize: 256, numLayers: 3, numHeads: 4, maxSeqLen: 128, seqLen: 128, intermediateSize: 512, kvLatentDim: 64, qLatentDim: 96, ropeDim: 16 },
  // Mamba2: in_proj read as three row blocks, the f32 chunk states kept for the backward, the [x | B | C] gradient written by one kernel.
  // Mamba3: in_proj read as five row blocks with its bias, B and C normalised per group, the MIMO projections per head.
  "llama-mamba3": { arch: "llama", vocabSize: 4096, hiddenSize: 256, numLayers: 3, numHeads: 4, maxSeqLen: 128, seqLen: 128, intermediateSize: 512, mambaLayers: [0, 2], mamba2HeadDim: 32, mamba2StateSize: 32, mamba2ChunkSize: 32, mamba3Enabled: true, mamba3MimoRank: 2 },
  "llama-mamba2": { arch: "llama", vocabSize: 4096, hiddenSize: 256, numLayers: 3, numHeads: 4, maxSeqLen: 128, seqLen: 128, intermediateSize: 512, mambaLayers: [0, 2], mamba2HeadDim: 64, mamba2StateSize: 64, mamba2ChunkSize: 32 },
};

describe("the memory plan is what the wasm backend measures", () => {
  for (const [name, c] of Object.entries(BENCH)) {
    it(`${name}: planned peak (evaluation included) within 2% of the measured peak; steady-state steps and evaluations allocate nothing`, async () => {
      const backend = await createWasmBackend({ threads: 2, measurePeak: false });
      const model = resolveModelConfig(c);
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
      // Evaluation runs between steps in the training arena, as kiln train's does.
      const runner = trainer.forwardRunner(8, c.seqLen);
      await trainer.step([batch]);
      await runner.run(batch.ids, batch.targets);
      const before = backend.memoryStats();
      await trainer.step([batch]);
      await runner.run(batch.ids, batch.targets);
      const after = backend.memoryStats();
      expect(after.allocCalls).toBe(before.allocCalls);
      const planned = trainer.memoryPlan.total + planForwardMemory(model, 8, c.seqLen, "f32", trainer.memoryPlan.activations);
      expect(Math.abs(after.peakBytes - planned) / planned).toBeLessThan(0.02);
      runner.dispose();
      trainer.dispose();
      backend.dispose();
    }, 120_000);
  }
});
