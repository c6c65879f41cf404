import { describe, expect, it } from "vitest";
import type { Backend, DeviceKind } from "@kiln/contract";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";
import { constantLrConfig } from "./support/trainer-config.js";

// The CUDA kernels (on the simulator) running the training loss as a GPU plans it: the
// vocabulary of 40 padded to 128 (a zero-padded copy of the head weight, the dtype's
// lowest value as the padded columns' bias, the backward products reading the logits'
// gradient's real columns through matmul's lda), against the
// same kernels planned as a CPU plans (no padding).
const sim = cudaStatus().simulator;
const model = resolveModelConfig({ arch: "gpt2", vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16 });

/** The simulator backend, saying it is a device of `kind`. */
function simulatorAs(kind: DeviceKind): Backend {
  const backend = createCudaSimBackend();
  const caps = backend.capabilities();
  return { ...backend, capabilities: () => ({ ...caps, device: { ...caps.device, kind } }) };
}

async function losses(kind: DeviceKind, dtype: "f32" | "bf16") {
  const backend = simulatorAs(kind);
  const trainer = new Trainer(backend, { ...constantLrConfig(model, 2, 16, 3), dtype });
  const out = [];
  for (let step = 0; step < 3; step++) {
    const batch = { ids: Int32Array.from({ length: 32 }, (_, i) => (i * 7 + step) % 40), targets: Int32Array.from({ length: 32 }, (_, i) => (i === 3 ? -1 : (i * 11 + step) % 40)) };
    const r = await trainer.step([batch]);
    out.push(r.loss, r.gradNorm);
  }
  trainer.dispose();
  backend.dispose();
  return out;
}

if (!sim.built) {
  it.skip(`vocabulary padding on cuda-sim: ${sim.detail}`, () => {});
} else {
  describe.each(["f32", "bf16"] as const)("%s training loss with the vocabulary padded, on cuda-sim", (dtype) => {
    it("gives the unpadded losses and gradient norms", async () => {
      const cpu = await losses("cpu", dtype);
      const gpu = await losses("gpu", dtype);
      const tolerance = dtype === "f32" ? 1e-5 : 2e-3;
      gpu.forEach((v, i) => expect(Math.abs(v - cpu[i]) / Math.abs(cpu[i]), `${i % 2 ? "grad norm" : "loss"} at step ${i >> 1}`).toBeLessThan(tolerance));
      expect(gpu.every(Number.isFinite)).toBe(true);
    }, 120_000);
  });
}
