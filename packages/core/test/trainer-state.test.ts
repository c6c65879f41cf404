import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CheckpointError, createReferenceBackend } from "@kiln/contract";
import { resolveModelConfig } from "../src/model/architectures.js";
import { initialParamBytes, uploadInitialParams } from "../src/model/init-params.js";
import { paramLayout } from "../src/model/param-layout.js";
import { Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { loadTrainerCheckpoint, saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";
import { ForwardRunner } from "../src/train/forward-runner.js";
import { planForwardMemory } from "../src/train/plan-training.js";

type Variant = "gpt2" | "llama" | "llama-moe" | "llama-mla" | "llama-hybrid" | "llama-mamba3";
const VARIANTS = ["gpt2", "llama", "llama-moe", "llama-mla", "llama-hybrid", "llama-mamba3"] as const;
const MODEL_OF: Record<Variant, object> = {
  gpt2: { arch: "gpt2" },
  llama: { arch: "llama", kvHeads: 2, intermediateSize: 32 },
  "llama-moe": { arch: "llama", kvHeads: 2, intermediateSize: 12, numExperts: 3, expertsPerToken: 2, sharedExpert: true },
  "llama-mla": { arch: "llama", intermediateSize: 32, kvLatentDim: 6, qLatentDim: 10, ropeDim: 2 },
  // Mamba2 in layer 0 (8 heads of 4 in 2 groups, state 5, chunks of 3), latent attention in layer 1, experts in both.
  "llama-hybrid": {
    arch: "llama",
    intermediateSize: 12,
    numExperts: 3,
    expertsPerToken: 2,
    sharedExpert: true,
    kvLatentDim: 6,
    qLatentDim: 10,
    ropeDim: 2,
    mambaLayers: [0],
    mamba2HeadDim: 4,
    mamba2StateSize: 5,
    mamba2ChunkSize: 3,
    mamba2NGroups: 2,
    mamba2ConvKernel: 3,
  },
  // The same with Mamba3 in layer 0: MIMO rank 2, the rotation (state 6) and the convolution.
  "llama-mamba3": {
    arch: "llama",
    intermediateSize: 12,
    numExperts: 3,
    expertsPerToken: 2,
    kvLatentDim: 6,
    ropeDim: 2,
    mambaLayers: [0],
    mamba2HeadDim: 4,
    mamba2StateSize: 6,
    mamba2ChunkSize: 3,
    mamba2NGroups: 2,
    mamba3Enabled: true,
    mamba3MimoRank: 2,
    mamba3UseConv: true,
  },
};

const config = (variant: Variant): TrainerConfig => ({
  model: resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, maxSeqLen: 8, ...MODEL_OF[variant] }),
  batchSize: 2,
  seqLen: 8,
  optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
  schedule: { kind: "cosine", peak: 3e-3, min: 3e-4, warmupSteps: 2, maxSteps: 8 },
  seed: 7,
});

const batchAt = (step: number) => {
  const ids = Int32Array.from({ length: 16 }, (_, i) => (i * 5 + step * 3) % 24);
  const targets = Int32Array.from({ length: 16 }, (_, i) => (i * 5 + step * 3 + 1) % 24);
  return [{ ids, targets }];
};

describe.each(VARIANTS)("%s trainer state", (arch) => {
  it("resumes from a checkpoint bit-exactly", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-ckpt-"));
    const file = path.join(dir, "step_3.safetensors");
    const straight = new Trainer(createReferenceBackend(), config(arch));
    const lossesA: number[] = [];
    for (let s = 0; s < 6; s++) lossesA.push((await straight.step(batchAt(s))).loss);

    const first = new Trainer(createReferenceBackend(), config(arch));
    const lossesB: number[] = [];
    for (let s = 0; s < 3; s++) lossesB.push((await first.step(batchAt(s))).loss);
    await saveTrainerCheckpoint(first, file, { "data.cursor": "3" });
    const resumed = new Trainer(createReferenceBackend(), { ...config(arch), seed: 99 });
    const meta = await loadTrainerCheckpoint(resumed, file);
    expect(meta["data.cursor"]).toBe("3");
    expect(resumed.stepCount).toBe(3);
    for (let s = 3; s < 6; s++) lossesB.push((await resumed.step(batchAt(s))).loss);

    expect(lossesB).toEqual(lossesA);
    const a = await straight.readParameters();
    const b = await resumed.readParameters();
    for (const [name, v] of a) expect(Buffer.from(b.get(name)!.buffer).equals(Buffer.from(v.buffer)), name).toBe(true);
    fs.rmSync(dir, { recursive: true });
  });

  it("refuses a checkpoint of another model, naming the tensor", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-ckpt-"));
    const file = path.join(dir, "other.safetensors");
    const other = new Trainer(createReferenceBackend(), { ...config(arch), model: { ...config(arch).model, hiddenSize: 8 } });
    await saveTrainerCheckpoint(other, file);
    const trainer = new Trainer(createReferenceBackend(), config(arch));
    await expect(loadTrainerCheckpoint(trainer, file)).rejects.toThrow(CheckpointError);
    await expect(loadTrainerCheckpoint(trainer, file)).rejects.toThrow(/the model needs F32 \[/);
    fs.rmSync(dir, { recursive: true });
  });

  it("refuses a checkpoint of more layers and one of fewer, naming both ways and the model setting", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-ckpt-"));
    const layers = (n: number) => ({ ...config(arch), model: { ...config(arch).model, numLayers: n, ...(arch === "llama-hybrid" || arch === "llama-mamba3" ? { mambaLayers: [0] } : {}) } });
    const deeper = path.join(dir, "deeper.safetensors");
    await saveTrainerCheckpoint(new Trainer(createReferenceBackend(), layers(3)), deeper);
    const err = await loadTrainerCheckpoint(new Trainer(createReferenceBackend(), layers(2)), deeper).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointError);
    expect((err as CheckpointError).message).toMatch(/^the checkpoint does not match the model: \d+ tensors of the checkpoint the model does not have \((model\.layers|transformer\.h)\.2\./);
    expect((err as CheckpointError).hint).toContain("the checkpoint's model has model.num_layers 3 (this run: 2)");
    const shallower = path.join(dir, "shallower.safetensors");
    await saveTrainerCheckpoint(new Trainer(createReferenceBackend(), layers(1)), shallower);
    await expect(loadTrainerCheckpoint(new Trainer(createReferenceBackend(), layers(2)), shallower)).rejects.toThrow(/tensors the model needs are missing \((model\.layers|transformer\.h)\.1\./);
    fs.rmSync(dir, { recursive: true });
  });

  it("allocates nothing in steady state and peaks exactly at the plan", async () => {
    const backend = createReferenceBackend();
    const trainer = new Trainer(backend, config(arch));
    await trainer.step(batchAt(0));
    const before = backend.memoryStats();
    for (let s = 1; s < 4; s++) await trainer.step(batchAt(s));
    const after = backend.memoryStats();
    expect(after.allocCalls).toBe(before.allocCalls);
    expect(after.peakBytes).toBe(trainer.memoryPlan.total);
    expect(trainer.memoryPlan.activations).toBeLessThan(trainer.memoryPlan.activationsUnpacked);
  });

  it("evaluates between steps in the training arena: peaks at the plan plus the runner's I/O, and neither changes the other's numbers", async () => {
    const c = config(arch);
    const backend = createReferenceBackend();
    const trainer = new Trainer(backend, c);
    const runner = trainer.forwardRunner(c.batchSize, c.seqLen);
    const evaluation = planForwardMemory(c.model, c.batchSize, c.seqLen, "f32", trainer.memoryPlan.activations);
    expect(runner.allocatedBytes).toBe(evaluation);
    expect(evaluation).toBeLessThan(planForwardMemory(c.model, c.batchSize, c.seqLen));
    // The same run without a shared arena: a trainer that never evaluates, and a runner with an arena of its own.
    const plainBackend = createReferenceBackend();
    const plain = new Trainer(plainBackend, c);
    const own = new ForwardRunner(plainBackend, c.model, plain.layout, plain.stateBuffers.params, c.batchSize, c.seqLen);
    expect(own.allocatedBytes).toBe(planForwardMemory(c.model, c.batchSize, c.seqLen));
    for (let s = 0; s < 3; s++) {
      const a = await trainer.step(batchAt(s));
      const b = await plain.step(batchAt(s));
      expect(a.loss).toBe(b.loss);
      expect(a.gradNorm).toBe(b.gradNorm);
      const [val] = batchAt(s + 10);
      expect(await runner.run(val.ids, val.targets)).toBe(await own.run(val.ids, val.targets));
      expect(await runner.logits()).toEqual(await own.logits());
    }
    expect(backend.memoryStats().peakBytes).toBe(trainer.memoryPlan.total + evaluation);
    runner.dispose();
    own.dispose();
  });
});

describe.each(VARIANTS)("%s activation recomputation", (arch) => {
  it("shrinks the planned arena (none > cheap > blocks) and leaves the training numbers unchanged", async () => {
    const withPolicy = (recompute: "none" | "cheap" | "blocks") => new Trainer(createReferenceBackend(), { ...config(arch), model: { ...config(arch).model, numLayers: 3 }, recompute });
    const kept = withPolicy("none");
    const cheap = withPolicy("cheap");
    const blocks = withPolicy("blocks");
    expect(cheap.memoryPlan.activations).toBeLessThan(kept.memoryPlan.activations);
    expect(blocks.memoryPlan.activations).toBeLessThan(cheap.memoryPlan.activations);
    for (let s = 0; s < 3; s++) {
      const a = await kept.step(batchAt(s));
      for (const other of [cheap, blocks]) {
        const b = await other.step(batchAt(s));
        expect(b.loss).toBe(a.loss);
        expect(b.gradNorm).toBe(a.gradNorm);
      }
    }
  });
});

describe("parameter initialisation", () => {
  it("uploads chunk by chunk exactly the values initialParamBytes lays out", async () => {
    const backend = createReferenceBackend();
    const model = resolveModelConfig({ arch: "gpt2", vocabSize: 300, hiddenSize: 1024, numLayers: 1, numHeads: 4, maxSeqLen: 8 });
    const layout = paramLayout(model);
    const params = backend.alloc(layout.bytes);
    uploadInitialParams(backend, params, layout, 5);
    const got = new Uint8Array(layout.bytes);
    await backend.download(params, got);
    expect(Buffer.from(got).equals(Buffer.from(initialParamBytes(layout, 5)))).toBe(true);
  });
});
