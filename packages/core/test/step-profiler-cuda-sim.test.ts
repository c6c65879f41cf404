import { describe, expect, it } from "vitest";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { StepProfiler } from "../src/exec/step-profiler.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";
import { constantLrConfig } from "./support/trainer-config.js";

const sim = cudaStatus().simulator;
const config = () => constantLrConfig(resolveModelConfig({ arch: "gpt2", vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16 }), 2, 16, 3);
const batch = (seed: number) => ({
  ids: Int32Array.from({ length: 32 }, (_, i) => (i * 7 + seed) % 40),
  targets: Int32Array.from({ length: 32 }, (_, i) => (i * 7 + seed + 1) % 40),
});

// The simulator's device timer through a profiled Trainer step: every call's time comes from
// its two marks, in issue order, for every call a host-timed step records.
if (!sim.built) {
  it.skip(`the device timer on cuda-sim: ${sim.detail}`, () => {});
} else {
  describe("a profiled step on cuda-sim with the device timer", () => {
    it("times each kernel call between its marks, in order, as many calls as a host-timed step", async () => {
      const backend = createCudaSimBackend();
      const profiler = new StepProfiler(undefined, undefined, backend.timer);
      const host = new StepProfiler();
      const trainer = new Trainer(backend, { ...config(), profiler });
      const hostBackend = createCudaSimBackend();
      const hostTimed = new Trainer(hostBackend, { ...config(), profiler: host });
      profiler.armed = host.armed = true;
      await trainer.step([batch(1), batch(2)]);
      await hostTimed.step([batch(1), batch(2)]);
      const [s] = profiler.steps;
      const [h] = host.steps;
      expect(s.kernels.length).toBe(h.kernels.length);
      let at = -Infinity;
      for (const k of s.kernels) {
        expect(k.end).toBeGreaterThanOrEqual(k.start);
        expect(k.start).toBeGreaterThanOrEqual(at - 1e-9);
        at = k.end;
      }
      // The device's time inside the calls is positive and fits inside the step.
      const device = s.kernels.reduce((t, k) => t + k.end - k.start, 0);
      expect(device).toBeGreaterThan(0);
      expect(device).toBeLessThanOrEqual(s.end - s.start);
      trainer.dispose();
      hostTimed.dispose();
      [backend, hostBackend].forEach((b) => b.dispose());
    }, 240_000);
  });
}
