import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Backend, CheckpointError } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Batch, Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { loadTrainerCheckpoint, saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";
import type { GradientSync } from "../src/train/gradient-sync.js";
import { loadFixture } from "./support/pytorch-fixture.js";
import { localSyncGroup } from "./support/local-sync-group.js";
import { globalBatch as batchOf, dataParallelConfig, maxAbsDiff, sliceOf as rankSlice } from "./support/data-parallel-batches.js";


// Data parallel on the wasm backend, llama-tiny: 2 ranks x batch 4 against 1 rank x batch 8
// on the same global batches. The same windows in the same order give the same run, up to
// f32 rounding (the gradient of 8 rows is summed as 4 + 4); the two ranks are bit-identical.
// Measured here: losses within 1e-7 relative, weights within 1.1e-6 after 5 steps at lr 1e-2.
const SEQ = 8;
const GLOBAL_ROWS = 8;
const globalBatch = (step: number, vocab: number) => batchOf(step, vocab, GLOBAL_ROWS, SEQ, 2 * SEQ - 3);
const sliceOf = (b: Batch, rank: number, ranks: number) => rankSlice(b, rank, ranks, GLOBAL_ROWS, SEQ);
const STEPS = 5;

let backend: Backend;
let config: TrainerConfig;
beforeAll(async () => {
  backend = await createWasmBackend({ threads: 2, measurePeak: false });
  const f = await loadFixture("llama-tiny");
  config = dataParallelConfig(f.config, GLOBAL_ROWS, SEQ, STEPS);
});
afterAll(() => backend?.dispose());

function rankTrainers(ranks: number, extra: Partial<TrainerConfig> = {}): { trainers: Trainer[]; group: ReturnType<typeof localSyncGroup> } {
  const group = localSyncGroup(ranks);
  // Each rank initializes from its own seed: the first step must make them all take rank 0's weights.
  const trainers = group.members.map((sync: GradientSync, r) => new Trainer(backend, { ...config, ...extra, batchSize: GLOBAL_ROWS / ranks, seed: config.seed + r, gradientSync: sync }));
  return { trainers, group };
}

describe("data-parallel Trainer (2 ranks x batch 4 vs 1 rank x batch 8)", () => {
  it("gives the one-rank losses and weights on the same global batches, the ranks bit-identical", async () => {
    const single = new Trainer(backend, config);
    const { trainers } = rankTrainers(2, { bucketBytes: 8 * 1024 });
    expect(trainers[0].gradientBuckets.length).toBeGreaterThan(3);
    const vocab = config.model.vocabSize;
    for (let step = 0; step < STEPS; step++) {
      const b = globalBatch(step, vocab);
      const one = await single.step([b]);
      const [r0, r1] = await Promise.all(trainers.map((t, r) => t.step([sliceOf(b, r, 2)])));
      expect(r0.loss).toBe(r1.loss);
      expect(r0.gradNorm).toBe(r1.gradNorm);
      expect(Math.abs(r0.loss - one.loss) / one.loss, `loss at step ${step + 1}`).toBeLessThan(1e-6);
      expect(Math.abs(r0.gradNorm - one.gradNorm) / one.gradNorm, `grad norm at step ${step + 1}`).toBeLessThan(1e-5);
    }
    const [w0, w1, w] = await Promise.all([trainers[0].readParameters(), trainers[1].readParameters(), single.readParameters()]);
    expect(maxAbsDiff(w0, w1)).toBe(0);
    // Adam turns relative rounding differences of near-zero gradients into absolute steps of up to ~lr * 1e-4.
    expect(maxAbsDiff(w0, w)).toBeLessThan(2e-6);
    expect(maxAbsDiff(await trainers[0].readParameters("m"), await trainers[1].readParameters("m"))).toBe(0);
    for (const t of [single, ...trainers]) t.dispose();
  });

  it("matches with gradient accumulation from a batch source (valid counts summed per micro-batch)", async () => {
    const single = new Trainer(backend, config);
    const { trainers } = rankTrainers(2);
    const vocab = config.model.vocabSize;
    const source = (batches: Batch[]) => ({ count: batches.length, next: async () => batches.shift()! });
    for (let step = 0; step < 3; step++) {
      const micro = [globalBatch(2 * step, vocab), globalBatch(2 * step + 1, vocab)];
      const one = await single.step(source([...micro]));
      const [r0, r1] = await Promise.all(trainers.map((t, r) => t.step(source(micro.map((b) => sliceOf(b, r, 2))))));
      expect(r0.loss).toBe(r1.loss);
      expect(Math.abs(r0.loss - one.loss) / one.loss).toBeLessThan(1e-6);
    }
    expect(maxAbsDiff(await trainers[0].readParameters(), await single.readParameters())).toBeLessThan(2e-6);
    for (const t of [single, ...trainers]) t.dispose();
  });

  it("syncs the f32 gradient sums under bf16: the ranks bit-identical, the loss that of one rank to bf16 rounding", async () => {
    const single = new Trainer(backend, { ...config, dtype: "bf16" });
    const { trainers } = rankTrainers(2, { dtype: "bf16" });
    for (let step = 0; step < 3; step++) {
      const b = globalBatch(step, config.model.vocabSize);
      const one = await single.step([b]);
      const [r0, r1] = await Promise.all(trainers.map((t, r) => t.step([sliceOf(b, r, 2)])));
      expect(r0.loss).toBe(r1.loss);
      expect(Math.abs(r0.loss - one.loss) / one.loss).toBeLessThan(1e-2);
    }
    expect(maxAbsDiff(await trainers[0].readParameters("master"), await trainers[1].readParameters("master"))).toBe(0);
    for (const t of [single, ...trainers]) t.dispose();
  });

  it("trains LoRA adapters alike (bf16, the frozen base shared from rank 0 with the adapters), the ranks bit-identical", async () => {
    const lora = { ...config, model: { ...config.model, lora: { rank: 2, alpha: 4, targets: ["q_proj", "v_proj", "down_proj"] } }, dtype: "bf16" as const };
    const single = new Trainer(backend, lora);
    const group = localSyncGroup(2);
    const trainers = group.members.map((sync: GradientSync, r) => new Trainer(backend, { ...lora, batchSize: GLOBAL_ROWS / 2, seed: lora.seed + r, gradientSync: sync }));
    for (let step = 0; step < 3; step++) {
      const b = globalBatch(step, config.model.vocabSize);
      const one = await single.step([b]);
      const [r0, r1] = await Promise.all(trainers.map((t, r) => t.step([sliceOf(b, r, 2)])));
      expect(r0.loss).toBe(r1.loss);
      expect(Math.abs(r0.loss - one.loss) / one.loss).toBeLessThan(1e-2);
    }
    // Only the adapters' gradients travel.
    expect(trainers[0].gradientBuckets.flatMap((b) => b.params).every((n) => n.includes(".lora_"))).toBe(true);
    expect(maxAbsDiff(await trainers[0].readParameters("master"), await trainers[1].readParameters("master"))).toBe(0);
    expect(maxAbsDiff(await trainers[0].readParameters("params"), await single.readParameters("params"))).toBeLessThan(2e-2);
    for (const t of [single, ...trainers]) t.dispose();
  });

  it("hands buckets to the communicator before backward has finished, the last layers first", async () => {
    let kernelCalls = 0;
    const counting: Backend = { ...backend, kernels: new Proxy(backend.kernels, { get: (k, name) => { const f = Reflect.get(k, name); return typeof f === "function" ? (...a: unknown[]) => { kernelCalls++; return f.apply(k, a); } : f; } }) };
    const group = localSyncGroup(2);
    const seen: number[] = [];
    const watched: GradientSync = { ...group.members[0], rank: 0, worldSize: 2, allReduce: (...a) => { seen.push(kernelCalls); return group.members[0].allReduce(...a); } };
    const trainers = [new Trainer(counting, { ...config, batchSize: 4, gradientSync: watched, bucketBytes: 8 * 1024 }), new Trainer(backend, { ...config, batchSize: 4, gradientSync: group.members[1], bucketBytes: 8 * 1024 })];
    const b = globalBatch(0, config.model.vocabSize);
    await Promise.all(trainers.map((t, r) => t.step([sliceOf(b, r, 2)])));
    const buckets = trainers[0].gradientBuckets;
    expect(seen.length).toBe(buckets.length);
    // The first bucket left while kernels of backward were still to run: later buckets saw more calls.
    expect(seen[0]).toBeLessThan(seen.at(-1)!);
    expect(new Set(seen).size).toBeGreaterThan(2);
    // Backward runs from the output: the first bucket handed off holds lm_head (the last of the decaying
    // matrices in the flat buffer), the last one the token embedding, which the final node writes.
    expect(buckets[0].params).toContain("lm_head.weight");
    expect(buckets.at(-1)!.params).toContain("model.embed_tokens.weight");
    for (const t of trainers) t.dispose();
  });

  it("saves the world size in checkpoints and refuses to resume with another unless each global batch keeps its rows", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "kiln-dp-"));
    try {
      const { trainers } = rankTrainers(2);
      const b = globalBatch(0, config.model.vocabSize);
      await Promise.all(trainers.map((t, r) => t.step([sliceOf(b, r, 2)])));
      const file = path.join(dir, "step_1.safetensors");
      await saveTrainerCheckpoint(trainers[0], file);
      const single = new Trainer(backend, { ...config, batchSize: GLOBAL_ROWS / 2 });
      const refused = await loadTrainerCheckpoint(single, file).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(CheckpointError);
      expect((refused as Error).message).toMatch(/trained by 2 data-parallel ranks, this run has 1/);
      expect((refused as CheckpointError).hint).toMatch(new RegExp(`or with 1 at --batch-size ${GLOBAL_ROWS} \\(${GLOBAL_ROWS} rows a global batch, as it was\\)`));
      // One rank with the whole global batch takes the run on.
      const whole = new Trainer(backend, config);
      await loadTrainerCheckpoint(whole, file);
      expect(whole.stepCount).toBe(1);
      whole.dispose();
      const { trainers: again } = rankTrainers(2);
      await Promise.all(again.map((t) => loadTrainerCheckpoint(t, file)));
      expect(again[1].stepCount).toBe(1);
      for (const t of [single, ...trainers, ...again]) t.dispose();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
