import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { resolveModelConfig } from "../src/model/architectures.js";
import { StepProfiler } from "../src/exec/step-profiler.js";
import { Trainer } from "../src/train/trainer.js";
import { rooflineSeconds, stepRoofline, trainingStepCosts } from "../src/train/step-costs.js";
import { constantLrConfig } from "./support/trainer-config.js";

const models = {
  gpt2: resolveModelConfig({ arch: "gpt2", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, maxSeqLen: 8 }),
  llama: resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 24, numLayers: 2, numHeads: 4, kvHeads: 2, intermediateSize: 32, maxSeqLen: 8 }),
};

describe("the kernel calls of a training step, planned without a backend", () => {
  for (const [arch, model] of Object.entries(models)) {
    for (const dtype of ["f32", "bf16", "f16"] as const) {
      it(`${arch} ${dtype}: the calls a profiled Trainer makes in a step of two micro-batches, in order, with the same FLOPs and bytes`, async () => {
        const profiler = new StepProfiler();
        profiler.armed = true;
        const trainer = new Trainer(createReferenceBackend(), { ...constantLrConfig(model, 2, 8, 1), dtype, profiler });
        const batch = { ids: Int32Array.from({ length: 16 }, (_, i) => i % 24), targets: Int32Array.from({ length: 16 }, (_, i) => (i + 1) % 24) };
        await trainer.step([batch, batch]);
        trainer.dispose();
        const recorded = profiler.steps[0].kernels.map(({ kernel, flops, bytes }) => ({ kernel, flops, bytes }));
        const planned = trainingStepCosts(model, 2, 8, dtype);
        expect(recorded).toEqual([...planned.before, ...planned.microBatch, ...planned.microBatch, ...planned.after]);
        expect(planned.after.map((c) => c.kernel)).toContain("adamW");
        // 16-bit parameters are rounded from the masters by AdamW itself: no cast pass follows.
        expect(planned.after.at(-1)!.kernel).toBe("adamW");
        expect(planned.after.map((c) => c.kernel)).not.toContain("cast");
      });
    }
  }

  it("a roofline: each call at the longer of its FLOPs at the peak and its bytes at the bandwidth", () => {
    const calls = [
      { flops: 8e12, bytes: 1e9 },
      { flops: 0, bytes: 3e9 },
      { flops: 1e12, bytes: 2e9 },
    ];
    // 8 s of arithmetic, 3 s of traffic, then 2 s of traffic (over 1 s of arithmetic).
    expect(rooflineSeconds(calls, 1e12, 1e9)).toBe(13);
  });

  it("a step's roofline counts the micro-batch's calls once per micro-batch", () => {
    const costs = { before: [{ kernel: "fill" as const, flops: 0, bytes: 4e9 }], microBatch: [{ kernel: "matmul" as const, flops: 2e12, bytes: 1e9 }], after: [{ kernel: "adamW" as const, flops: 0, bytes: 7e9 }] };
    // 4 s + 3 x max(2 s, 1 s) + 7 s; 4 + 3 + 7 GB.
    expect(stepRoofline(costs, 3, 1e12, 1e9)).toEqual({ seconds: 17, bytes: 14e9 });
  });
});
