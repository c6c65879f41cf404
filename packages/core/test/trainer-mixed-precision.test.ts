import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Backend, DeviceError, type FloatDType, createReferenceBackend, encodeToBytes, decodeElements } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { loadTrainerCheckpoint, saveTrainedWeights, saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";
import { InferenceSession } from "../src/generate/inference-session.js";
import { readSafetensors } from "../src/checkpoint/safetensors-file.js";

const config = (arch: "gpt2" | "llama", dtype: FloatDType): TrainerConfig => ({
  model: resolveModelConfig({ arch, vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16, ...(arch === "llama" ? { kvHeads: 2, intermediateSize: 64 } : {}) }),
  batchSize: 2,
  seqLen: 16,
  optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
  schedule: { kind: "cosine", peak: 3e-3, min: 3e-4, warmupSteps: 2, maxSteps: 40 },
  seed: 11,
  dtype,
});

const batchAt = (step: number, micro = 0) => {
  const ids = Int32Array.from({ length: 32 }, (_, i) => (i * 7 + step * 3 + micro * 11) % 40);
  const targets = Int32Array.from({ length: 32 }, (_, i) => (i * 7 + step * 3 + micro * 11 + 1) % 40);
  return { ids, targets };
};

/** Every parameter equals its master rounded to nearest even (the invariant of mixed precision). */
async function expectParamsAreRoundedMasters(trainer: Trainer) {
  const params = await trainer.readParameters("params");
  const masters = await trainer.readParameters("master");
  for (const [name, master] of masters) {
    const rounded = Float32Array.from(decodeElements(encodeToBytes(master, trainer.dtype), trainer.dtype, master.length));
    expect(Buffer.from(params.get(name)!.buffer).equals(Buffer.from(rounded.buffer)), name).toBe(true);
  }
}

let backend: Backend;
beforeAll(async () => {
  backend = await createWasmBackend({ threads: 2, measurePeak: false });
});
afterAll(() => backend.dispose());

describe.each(["gpt2", "llama"] as const)("%s mixed precision on the wasm backend", (arch) => {
  it.each(["bf16", "f16"] as const)("%s follows the f32 loss curve with two micro-batches a step, 16-bit parameters rounded from f32 masters", async (dtype) => {
    const f32 = new Trainer(backend, config(arch, "f32"));
    const half = new Trainer(backend, config(arch, dtype));
    expect(half.layout.dtype).toBe(dtype);
    expect(half.stateLayout.dtype).toBe("f32");
    for (let s = 0; s < 25; s++) {
      const micro = [batchAt(s, 0), batchAt(s, 1)];
      const a = await f32.step(micro);
      const b = await half.step(micro);
      expect(b.skipped).toBe(false);
      expect(Number.isFinite(b.gradNorm)).toBe(true);
      // Both start at about log(40); bf16 keeps 8 significant bits, f16 11.
      expect(Math.abs(b.loss - a.loss) / a.loss, `step ${s}`).toBeLessThan(dtype === "bf16" ? 0.03 : 0.01);
    }
    expect((await half.step([batchAt(0)])).loss).toBeLessThan(Math.log(40) - 0.5);
    await expectParamsAreRoundedMasters(half);
    f32.dispose();
    half.dispose();
  });

  it.each(["bf16", "f16"] as const)("%s: the plan is the measured peak exactly and steady-state steps allocate nothing", async (dtype) => {
    const own = await createWasmBackend({ threads: 2, measurePeak: false });
    const trainer = new Trainer(own, config(arch, dtype));
    await trainer.step([batchAt(0), batchAt(0, 1)]);
    const before = own.memoryStats();
    for (let s = 1; s < 3; s++) await trainer.step([batchAt(s), batchAt(s, 1)]);
    const after = own.memoryStats();
    expect(after.allocCalls).toBe(before.allocCalls);
    expect(after.peakBytes).toBe(trainer.memoryPlan.total);
    const f32Plan = new Trainer(createReferenceBackend(), config(arch, "f32")).memoryPlan;
    // 16-bit parameters and gradients plus f32 masters and gradient sums; f32 AdamW state either way.
    expect(trainer.memoryPlan.optimizerState).toBe(f32Plan.optimizerState);
    expect(trainer.memoryPlan.parameters).toBeGreaterThan(f32Plan.parameters);
    expect(trainer.memoryPlan.activations).toBeLessThan(f32Plan.activations);
    trainer.dispose();
    own.dispose();
  });
});

describe("f16 dynamic loss scaling", () => {
  it("skips a step whose gradients overflow, halves the scale, and keeps every NaN out of weights and AdamW state", async () => {
    // 2^40 times the loss gradient overflows f16 (max 65504) in the first backward pass.
    const trainer = new Trainer(backend, { ...config("gpt2", "f16"), lossScaler: { initialScale: 2 ** 40 } });
    const before = await trainer.readParameters("master");
    const first = await trainer.step([batchAt(0)]);
    expect(first.skipped).toBe(true);
    expect(first.lossScale).toBe(2 ** 40);
    expect(Number.isFinite(first.gradNorm)).toBe(false);
    expect(trainer.lossScaler!.scale).toBe(2 ** 39);
    expect(trainer.stepCount).toBe(1);
    expect(trainer.skippedSteps).toBe(1);
    const after = await trainer.readParameters("master");
    for (const [name, v] of before) expect(Buffer.from(after.get(name)!.buffer).equals(Buffer.from(v.buffer)), name).toBe(true);
    for (const which of ["m", "v"] as const) for (const v of (await trainer.readParameters(which)).values()) expect(v.every((x) => x === 0)).toBe(true);

    // The scale keeps halving on overflow until the gradients fit; then updates resume, all finite.
    let steps = 1;
    let r = first;
    while (r.skipped) {
      r = await trainer.step([batchAt(steps)]);
      steps++;
      expect(steps).toBeLessThan(40);
    }
    expect(trainer.lossScaler!.scale).toBeLessThan(2 ** 40);
    expect(trainer.skippedSteps).toBe(steps - 1);
    for (let s = 0; s < 3; s++) expect((await trainer.step([batchAt(s)])).skipped).toBe(false);
    for (const which of ["params", "master", "m", "v"] as const) {
      for (const [name, v] of await trainer.readParameters(which)) expect(v.every(Number.isFinite), `${which} ${name}`).toBe(true);
    }
    await expectParamsAreRoundedMasters(trainer);
    trainer.dispose();
  });

  it("keeps a scaled parameter gradient past f16's 65504 in f32: the step is taken, not skipped", async () => {
    // Every target the same token: the first attention projection's bias gradient sums to about 1.6,
    // times the default scale 2^16 well past f16's largest value, while every activation gradient fits.
    const trainer = new Trainer(backend, config("gpt2", "f16"));
    const batch = { ids: batchAt(0).ids, targets: new Int32Array(32).fill(5) };
    const r = await trainer.step([batch]);
    expect(r.skipped).toBe(false);
    expect(r.lossScale).toBe(2 ** 16);
    let largest = 0;
    for (const v of (await trainer.readParameters("grads")).values()) for (const x of v) largest = Math.max(largest, Math.abs(x) * 2 ** 16);
    expect(largest).toBeGreaterThan(65504);
    for (const v of (await trainer.readParameters("master")).values()) expect(v.every(Number.isFinite)).toBe(true);
    trainer.dispose();
  });

  it("doubles the scale after growthInterval finite steps in a row", async () => {
    const trainer = new Trainer(backend, { ...config("llama", "f16"), lossScaler: { initialScale: 256, growthInterval: 3 } });
    const scales: number[] = [];
    for (let s = 0; s < 7; s++) scales.push((await trainer.step([batchAt(s)])).lossScale!);
    expect(scales).toEqual([256, 256, 256, 512, 512, 512, 1024]);
    trainer.dispose();
  });

  it("bf16 and f32 steps carry no loss scale and never skip", async () => {
    for (const dtype of ["f32", "bf16"] as const) {
      const trainer = new Trainer(backend, config("gpt2", dtype));
      const r = await trainer.step([batchAt(0)]);
      expect(r.skipped).toBe(false);
      expect(r.lossScale).toBeUndefined();
      expect(trainer.lossScaler).toBeUndefined();
      trainer.dispose();
    }
  });
});

describe("a backend that does not declare a dtype", () => {
  it("refuses to train in it, naming the backend, the kernels and what to do", () => {
    const reference = createReferenceBackend();
    const caps = reference.capabilities();
    const f32Only: Backend = {
      ...reference,
      name: "f32-only",
      capabilities: () => ({ ...caps, kernelDTypes: Object.fromEntries(Object.entries(caps.kernelDTypes).map(([k, d]) => [k, d.filter((x) => x !== "bf16")])) as typeof caps.kernelDTypes }),
    };
    const attempt = () => new Trainer(f32Only, config("gpt2", "bf16"));
    expect(attempt).toThrow(DeviceError);
    expect(attempt).toThrow(/the f32-only backend cannot train in bf16: it does not declare bf16 for .*matmul/);
    expect(() => new Trainer(f32Only, config("gpt2", "f16"))).not.toThrow();
  });
});

describe.each(["bf16", "f16"] as const)("%s resume", (dtype) => {
  it.each(["gpt2", "llama"] as const)("%s: stopping after 4 steps and resuming from the checkpoint is bit-identical to an uninterrupted run", async (arch) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mixed-"));
    const file = path.join(dir, "step_4.safetensors");
    // f16: a start scale that overflows once and a short growth interval, so the scaler state matters on resume.
    const cfg: TrainerConfig = { ...config(arch, dtype), ...(dtype === "f16" ? { lossScaler: { initialScale: 2 ** 30, growthInterval: 3 } } : {}) };
    const micro = (s: number) => [batchAt(s, 0), batchAt(s, 1)];
    const straight = new Trainer(backend, cfg);
    const lossesA: number[] = [];
    for (let s = 0; s < 8; s++) lossesA.push((await straight.step(micro(s))).loss);

    const first = new Trainer(backend, cfg);
    const lossesB: number[] = [];
    for (let s = 0; s < 4; s++) lossesB.push((await first.step(micro(s))).loss);
    await saveTrainerCheckpoint(first, file);
    first.dispose();
    const resumed = new Trainer(backend, { ...cfg, seed: 99 });
    const meta = await loadTrainerCheckpoint(resumed, file);
    expect(meta["kiln.dtype"]).toBe(dtype);
    for (let s = 4; s < 8; s++) lossesB.push((await resumed.step(micro(s))).loss);

    expect(lossesB).toEqual(lossesA);
    expect(resumed.skippedSteps).toBe(straight.skippedSteps);
    if (dtype === "f16") {
      expect(straight.skippedSteps).toBeGreaterThan(0);
      expect(resumed.lossScaler!.state).toEqual(straight.lossScaler!.state);
    }
    for (const which of ["params", "master", "m", "v"] as const) {
      const a = await straight.readParameters(which);
      const b = await resumed.readParameters(which);
      for (const [name, v] of a) expect(Buffer.from(b.get(name)!.buffer).equals(Buffer.from(v.buffer)), `${which} ${name}`).toBe(true);
    }
    straight.dispose();
    resumed.dispose();
    fs.rmSync(dir, { recursive: true });
  });
});

describe("an f16 checkpoint after an overflow", () => {
  it("holds only finite tensors and the halved scale", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mixed-"));
    const file = path.join(dir, "step_1.safetensors");
    const trainer = new Trainer(backend, { ...config("llama", "f16"), lossScaler: { initialScale: 2 ** 40 } });
    expect((await trainer.step([batchAt(0)])).skipped).toBe(true);
    await saveTrainerCheckpoint(trainer, file);
    const saved = await readSafetensors(file);
    expect(saved.metadata["kiln.loss_scale"]).toBe(String(2 ** 39));
    expect(saved.metadata["kiln.skipped_steps"]).toBe("1");
    for (const t of saved.tensors.values()) {
      expect(t.dtype).toBe("F32");
      const values = new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength));
      expect(values.every(Number.isFinite), t.name).toBe(true);
    }
    trainer.dispose();
    fs.rmSync(dir, { recursive: true });
  });
});

describe.each(["bf16", "f16"] as const)("%s exported weights", (dtype) => {
  it("hold the parameters in the training dtype (f32 masters on request) and generation runs them", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mixed-"));
    const trainer = new Trainer(backend, config("llama", dtype));
    for (let s = 0; s < 3; s++) await trainer.step([batchAt(s)]);
    const halfFile = path.join(dir, "final.safetensors");
    const f32File = path.join(dir, "final-f32.safetensors");
    await saveTrainedWeights(trainer, halfFile);
    await saveTrainedWeights(trainer, f32File, {}, "f32");
    const params = await trainer.readParameters("params");
    const masters = await trainer.readParameters("master");
    const half = await readSafetensors(halfFile);
    const full = await readSafetensors(f32File);
    expect(half.metadata["kiln.dtype"]).toBe(dtype);
    expect(half.tensors.size).toBe(trainer.layout.specs.length);
    for (const [name, p] of params) {
      const t = half.tensors.get(name)!;
      expect(t.dtype).toBe(dtype.toUpperCase());
      expect(Float32Array.from(decodeElements(t.data, dtype, p.length))).toEqual(p);
      const f = full.tensors.get(name)!;
      expect(f.dtype).toBe("F32");
      expect(Buffer.from(f.data).equals(Buffer.from(masters.get(name)!.buffer))).toBe(true);
    }

    const session = await InferenceSession.fromCheckpoint(backend, halfFile, 16);
    const runner = trainer.forwardRunner(1, 16);
    const ids = Int32Array.from({ length: 16 }, (_, i) => (i * 3) % 40);
    await runner.run(ids);
    const expected = (await runner.logits()).subarray(15 * 40, 16 * 40);
    expect(Array.from(await session.nextLogits(Array.from(ids)))).toEqual(Array.from(expected));
    session.dispose();
    runner.dispose();
    trainer.dispose();
    fs.rmSync(dir, { recursive: true });
  });
});
