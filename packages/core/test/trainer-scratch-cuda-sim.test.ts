import { expect, it } from "vitest";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";
import { constantLrConfig } from "./support/trainer-config.js";

// The CUDA kernels' own scratch (partial sums, attention's D, routing tables) is reserved
// when a trainer compiles its steps: prepared calls reserve theirs, and calls that read a
// runtime scalar (the loss scale, MoE's load-balancing weight) are sized when compiled.
// Training then asks for no more, so no step allocates and no recorded graph goes stale.
const sim = cudaStatus().simulator;

const models = {
  gpt2: { arch: "gpt2" },
  // moeRoute reads loadBalanceAlpha at run time and takes scratch for its routing table.
  "llama-moe": { arch: "llama", kvHeads: 2, intermediateSize: 12, numExperts: 3, expertsPerToken: 2, sharedExpert: true },
};

const batch = (seed: number, ignored = 0) => ({
  ids: Int32Array.from({ length: 32 }, (_, i) => (i * 7 + seed) % 40),
  targets: Int32Array.from({ length: 32 }, (_, i) => (i < ignored ? -1 : (i * 7 + seed + 1) % 40)),
});

for (const [name, model] of Object.entries(models)) {
  for (const dtype of ["f32", "f16"] as const) {
    it.skipIf(!sim.built)(`${name} ${dtype} on cuda-sim: every kernel's scratch reserved when the steps are compiled, none asked for while training`, async () => {
      const backend = createCudaSimBackend();
      const config = resolveModelConfig({ ...model, vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16 } as never);
      const t = new Trainer(backend, { ...constantLrConfig(config, 2, 16, 3), dtype });
      const reserved = backend.memoryStats().kernelScratchBytes ?? 0;
      expect(reserved).toBeGreaterThan(0);
      const before = backend.memoryStats().allocCalls;
      // Two micro-batches a step; ignored targets at step 1 change the loss scale.
      for (let step = 0; step < 3; step++) await t.step([batch(step, step === 1 ? 5 : 0), batch(step + 10)]);
      expect(backend.memoryStats().kernelScratchBytes).toBe(reserved);
      expect(backend.memoryStats().allocCalls).toBe(before);
      t.dispose();
      backend.dispose();
    }, 240_000);
  }
}
