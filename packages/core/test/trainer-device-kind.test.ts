import { describe, expect, it } from "vitest";
import type { Backend, DeviceKind, FloatDType } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { resolveModelConfig } from "../src/model/architectures.js";
import type { ModelConfig } from "../src/model/config.js";
import { Trainer } from "../src/train/trainer.js";
import { planTrainingMemory } from "../src/train/plan-training.js";
import { constantLrConfig } from "./support/trainer-config.js";

// 8 x 256 rows of 4096 f32 logits: 2 chunks of 1024 rows on a CPU (16 MiB each), 1 on a GPU (up to 1 GiB).
const model = resolveModelConfig({ arch: "gpt2", vocabSize: 4096, hiddenSize: 64, numLayers: 1, numHeads: 2, maxSeqLen: 256 });
const ROWS = 8 * 256;

/** The wasm backend, saying it is a device of `kind` (the plan follows the kind; the kernels are the same). */
function presentedAs(backend: Backend, kind: DeviceKind): Backend {
  const caps = backend.capabilities();
  return { ...backend, capabilities: () => ({ ...caps, device: { ...caps.device, kind } }) };
}

async function firstSteps(kind: DeviceKind, config: ModelConfig = model, dtype: FloatDType = "f32", lossChunkBytes?: number) {
  const wasm = await createWasmBackend({ threads: 2, measurePeak: false });
  const trainer = new Trainer(presentedAs(wasm, kind), { ...constantLrConfig(config, 8, 256, 3), dtype, ...(lossChunkBytes === undefined ? {} : { lossChunkBytes }) });
  const vocab = config.vocabSize;
  const batch = { ids: Int32Array.from({ length: ROWS }, (_, i) => (i * 31) % vocab), targets: Int32Array.from({ length: ROWS }, (_, i) => (i * 17 + 3) % vocab) };
  const losses = [];
  for (let i = 0; i < 3; i++) losses.push((await trainer.step([batch])).loss);
  const result = { losses, plan: trainer.memoryPlan, peak: wasm.memoryStats().peakBytes, recompute: trainer.recompute };
  trainer.dispose();
  wasm.dispose();
  return result;
}

describe("a trainer plans for the kind of device it runs on", () => {
  it("a GPU's plan takes the training loss's logits in one chunk where a CPU's takes two; the steps agree", async () => {
    const cpu = await firstSteps("cpu");
    const gpu = await firstSteps("gpu");
    // The default recompute ("auto"): the element-wise outputs again on a CPU, everything kept on a GPU where it fits.
    expect([cpu.recompute, gpu.recompute]).toEqual(["cheap", "none"]);
    expect(cpu.plan).toEqual(planTrainingMemory(model, 8, 256, "f32", "cheap", "cpu"));
    expect(gpu.plan).toEqual(planTrainingMemory(model, 8, 256, "f32", "none", "gpu"));
    // One chunk of 2048 x 4096 f32 logits (and their gradient) instead of 1024 rows: at least 8 MiB more.
    expect(gpu.plan.activations - cpu.plan.activations).toBeGreaterThanOrEqual(8 * 2 ** 20);
    expect(gpu.peak).toBe(gpu.plan.total);
    // The same sums in another grouping: the head's gradient is added in one product instead of two.
    gpu.losses.forEach((l, i) => expect(Math.abs(l - cpu.losses[i]) / cpu.losses[i]).toBeLessThan(1e-5));
    // lossChunkBytes replaces the device's chunk size: the GPU's trainer told 8 MiB takes the CPU's two chunks.
    const chosen = await firstSteps("gpu", model, "f32", 8 * 2 ** 20);
    expect(chosen.plan).toEqual(planTrainingMemory(model, 8, 256, "f32", "none", "gpu", 8 * 2 ** 20));
    expect(chosen.plan.activations).toBeLessThan(gpu.plan.activations);
    expect(chosen.peak).toBe(chosen.plan.total);
    // The same chunks as the CPU's and the same kernels (a recomputed output has the same bits as a kept one): the same losses.
    expect(chosen.losses).toEqual(cpu.losses);
  }, 60_000);

  it("a GPU pads an odd vocabulary to a multiple of 128 for the loss's products; the losses are the CPU's, the peak the plan", async () => {
    // 4001 tokens: rows of 4001 logits are not 16-byte aligned; the GPU's plan runs them as 4096.
    const odd = resolveModelConfig({ arch: "gpt2", vocabSize: 4001, hiddenSize: 64, numLayers: 1, numHeads: 2, maxSeqLen: 256 });
    for (const dtype of ["f32", "bf16"] as const) {
      const cpu = await firstSteps("cpu", odd, dtype);
      const gpu = await firstSteps("gpu", odd, dtype);
      expect(gpu.plan).toEqual(planTrainingMemory(odd, 8, 256, dtype, "none", "gpu"));
      expect(gpu.peak, dtype).toBe(gpu.plan.total);
      const tolerance = dtype === "f32" ? 1e-5 : 2e-3;
      gpu.losses.forEach((l, i) => expect(Math.abs(l - cpu.losses[i]) / cpu.losses[i], `${dtype} step ${i}`).toBeLessThan(tolerance));
    }
  }, 120_000);
});
