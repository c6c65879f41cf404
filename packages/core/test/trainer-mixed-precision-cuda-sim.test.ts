import { describe, expect, it } from "vitest";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";

// The CUDA kernels (compiled for the host by the simulator) train in bf16 and f16 too:
// the loss falls, the parameters stay the rounded masters, and the plan is the peak.
const sim = cudaStatus().simulator;
if (!sim.built) {
  it.skip(`mixed precision on cuda-sim: ${sim.detail}`, () => {});
} else {
  describe.each(["bf16", "f16"] as const)("%s training on cuda-sim", (dtype) => {
    it("learns a fixed batch, peaks exactly at the plan and keeps f32 masters", async () => {
      const backend = createCudaSimBackend();
      const trainer = new Trainer(backend, {
        model: resolveModelConfig({ arch: "llama", vocabSize: 40, hiddenSize: 32, numLayers: 1, numHeads: 4, maxSeqLen: 16, kvHeads: 2, intermediateSize: 64 }),
        batchSize: 2,
        seqLen: 16,
        seed: 1,
        dtype,
        optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
        schedule: { kind: "constant", peak: 3e-3, min: 3e-3, warmupSteps: 0, maxSteps: 10 },
      });
      const ids = Int32Array.from({ length: 32 }, (_, i) => (i * 7) % 40);
      const targets = Int32Array.from({ length: 32 }, (_, i) => (i * 7 + 1) % 40);
      const first = await trainer.step([{ ids, targets }]);
      let last = first;
      for (let s = 0; s < 5; s++) last = await trainer.step([{ ids, targets }, { ids, targets }]);
      expect(first.skipped || last.skipped).toBe(false);
      expect(last.loss).toBeLessThan(first.loss - 0.2);
      expect(backend.memoryStats().peakBytes).toBe(trainer.memoryPlan.total);
      const params = await trainer.readParameters("params");
      const masters = await trainer.readParameters("master");
      for (const [name, m] of masters) {
        const p = params.get(name)!;
        // Each 16-bit parameter is its master rounded: within half a unit in the last place.
        for (let i = 0; i < m.length; i++) expect(Math.abs(p[i] - m[i]), name).toBeLessThanOrEqual(Math.abs(m[i]) * (dtype === "bf16" ? 2 ** -8 : 2 ** -11) + 1e-7);
      }
      trainer.dispose();
      backend.dispose();
    }, 120_000);
  });
}
