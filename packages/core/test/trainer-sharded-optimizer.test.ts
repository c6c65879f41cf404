import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Batch, Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { loadTrainerCheckpoint, saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";
import { optimizerShard, ownedElements } from "../src/train/optimizer-shard.js";
import { halvesStateOffsets } from "../src/model/param-layout.js";
import { localSyncGroup } from "./support/local-sync-group.js";
import { globalBatch as batchOf, dataParallelConfig, maxAbsDiff, sliceOf as rankSlice } from "./support/data-parallel-batches.js";
import { loadFixture } from "./support/pytorch-fixture.js";

// ZeRO stage 1 on the wasm backend, llama-tiny: ranks with a sharded optimizer against the
// same ranks unsharded, on the same global batches. The local sync group sums in rank order,
// so the summed gradients are the same bits either way; only the gradient norm is added up
// differently (per shard, then over the ranks), which moves the clip scale in the last bits.
const SEQ = 8;
const GLOBAL_ROWS = 6;
const globalBatch = (step: number, vocab: number) => batchOf(step, vocab, GLOBAL_ROWS, SEQ, SEQ - 3);
const sliceOf = (b: Batch, rank: number, ranks: number) => rankSlice(b, rank, ranks, GLOBAL_ROWS, SEQ);

let backend: Backend;
let config: TrainerConfig;
beforeAll(async () => {
  backend = await createWasmBackend({ threads: 2, measurePeak: false });
  const f = await loadFixture("llama-tiny");
  config = dataParallelConfig(f.config, GLOBAL_ROWS, SEQ, 20);
});
afterAll(() => backend?.dispose());

function rankTrainers(ranks: number, extra: Partial<TrainerConfig> = {}): Trainer[] {
  const group = localSyncGroup(ranks);
  return group.members.map((sync, r) => new Trainer(backend, { ...config, ...extra, batchSize: GLOBAL_ROWS / ranks, seed: config.seed + r, gradientSync: sync }));
}

async function stepAll(trainers: Trainer[], b: Batch) {
  return Promise.all(trainers.map((t, r) => t.step([sliceOf(b, r, trainers.length)])));
}

describe("sharded optimizer (ZeRO stage 1)", () => {
  for (const ranks of [2, 3]) {
    it(`${ranks} ranks: 20 steps with the unsharded run's losses (1e-6 relative) and weights, m and v`, async () => {
      const plain = rankTrainers(ranks);
      const sharded = rankTrainers(ranks, { shardOptimizer: true });
      const shard = sharded.map((t) => t.optimizerShard!);
      // The owned ranges tile the state: each rank's AdamW state is its share.
      expect(shard.map((s) => s.first)).toEqual(shard.map((s, r) => r * s.chunk));
      expect(shard.at(-1)!.end).toBe(plain[0].stateLayout.bytes / 4);
      expect(sharded[0].stateBuffers.m.byteLength).toBe(4 * ownedElements(shard[0]));
      for (let step = 0; step < 20; step++) {
        const b = globalBatch(step, config.model.vocabSize);
        const [p, s] = [await stepAll(plain, b), await stepAll(sharded, b)];
        for (const r of s) expect(r.loss).toBe(s[0].loss);
        expect(Math.abs(s[0].loss - p[0].loss) / p[0].loss, `loss at step ${step + 1}`).toBeLessThan(1e-6);
        expect(Math.abs(s[0].gradNorm - p[0].gradNorm) / p[0].gradNorm).toBeLessThan(1e-5);
      }
      const weights = await Promise.all(sharded.map((t) => t.readParameters()));
      for (const w of weights) expect(maxAbsDiff(w, weights[0])).toBe(0);
      expect(maxAbsDiff(weights[0], await plain[0].readParameters())).toBeLessThan(2e-6);
      // Gathering m and v is a collective: every rank reads them at once.
      const [m] = await Promise.all(sharded.map((t) => t.readParameters("m")));
      const [v] = await Promise.all(sharded.map((t) => t.readParameters("v")));
      expect(maxAbsDiff(m, await plain[0].readParameters("m"))).toBeLessThan(1e-6);
      expect(maxAbsDiff(v, await plain[0].readParameters("v"))).toBeLessThan(1e-8);
      for (const t of [...plain, ...sharded]) t.dispose();
    });
  }

  it.each([2, 3])("bf16, %i ranks: the owned f32 masters and the all-gathered 16-bit parameters match the unsharded run", async (ranks) => {
    const plain = rankTrainers(ranks, { dtype: "bf16" });
    const sharded = rankTrainers(ranks, { dtype: "bf16", shardOptimizer: true });
    for (let step = 0; step < 5; step++) {
      const b = globalBatch(step, config.model.vocabSize);
      const [p, s] = [await stepAll(plain, b), await stepAll(sharded, b)];
      expect(s[1].loss).toBe(s[0].loss);
      expect(Math.abs(s[0].loss - p[0].loss) / p[0].loss).toBeLessThan(1e-6);
    }
    const [masters] = await Promise.all(sharded.map((t) => t.readParameters("master")));
    expect(maxAbsDiff(masters, await plain[0].readParameters("master"))).toBeLessThan(2e-6);
    const params = await Promise.all(sharded.map((t) => t.readParameters("params")));
    for (const p of params) expect(maxAbsDiff(p, params[0])).toBe(0);
    // The 16-bit parameters are the masters rounded: as close to the unsharded ones as bf16 allows.
    expect(maxAbsDiff(params[0], await plain[0].readParameters("params"))).toBeLessThan(1e-2);
    for (const t of [...plain, ...sharded]) t.dispose();
  });

  it("plans and allocates each rank's share of AdamW's state (and of the masters under bf16)", () => {
    for (const dtype of ["f32", "bf16"] as const) {
      const [plain] = rankTrainers(3, { dtype });
      const sharded = rankTrainers(3, { dtype, shardOptimizer: true });
      const elements = plain.stateLayout.bytes / 4;
      const last = ownedElements(optimizerShard(elements, 2, 3));
      expect(last).toBeLessThan(elements / 3 + 16 * 3);
      expect(sharded[0].memoryPlan.optimizerState).toBe(8 * last);
      expect(plain.memoryPlan.optimizerState).toBe(8 * elements);
      // bf16: the owned masters replace the whole ones; the parameters lie at half their state offsets,
      // so the all-gather fills them in place (no copy in state order).
      expect(sharded[0].memoryPlan.parameters).toBe(sharded[0].layout.bytes + (dtype === "bf16" ? 4 * last : 0));
      expect(plain.memoryPlan.parameters).toBe(plain.layout.bytes + (dtype === "bf16" ? 4 * elements : 0));
      if (dtype === "bf16") expect(halvesStateOffsets(sharded[0].layout, sharded[0].stateLayout)).toBe(true);
      expect(sharded[0].memoryPlan.gradients).toBe(plain.memoryPlan.gradients);
      for (const t of [plain, ...sharded]) t.dispose();
    }
  });

  it("writes whole checkpoints (gathered on save) that load into sharded and unsharded ranks alike", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "kiln-zero-"));
    try {
      const sharded = rankTrainers(2, { shardOptimizer: true, dtype: "bf16" });
      for (let step = 0; step < 3; step++) await stepAll(sharded, globalBatch(step, config.model.vocabSize));
      const file = path.join(dir, "step_3.safetensors");
      const whole = await Promise.all(sharded.map((t) => t.wholeOptimizerState()));
      expect(whole[1]).toBeUndefined();
      await saveTrainerCheckpoint(sharded[0], file, {}, whole[0]);
      // Unsharded ranks load it and write it back: the same bytes.
      const plain = rankTrainers(2, { dtype: "bf16" });
      await Promise.all(plain.map((t) => loadTrainerCheckpoint(t, file)));
      const again = path.join(dir, "again.safetensors");
      await saveTrainerCheckpoint(plain[0], again);
      expect(Buffer.compare(await readFile(file), await readFile(again))).toBe(0);
      // Sharded ranks load it (each its own part) and write it back: the same bytes.
      const resumed = rankTrainers(2, { shardOptimizer: true, dtype: "bf16" });
      await Promise.all(resumed.map((t) => loadTrainerCheckpoint(t, file)));
      const wholeAgain = await Promise.all(resumed.map((t) => t.wholeOptimizerState()));
      const third = path.join(dir, "third.safetensors");
      await saveTrainerCheckpoint(resumed[0], third, {}, wholeAgain[0]);
      expect(Buffer.compare(await readFile(file), await readFile(third))).toBe(0);
      // Both go on alike.
      for (let step = 3; step < 6; step++) {
        const b = globalBatch(step, config.model.vocabSize);
        const [p, s] = [await stepAll(plain, b), await stepAll(resumed, b)];
        expect(Math.abs(s[0].loss - p[0].loss) / p[0].loss).toBeLessThan(1e-6);
      }
      await expect(saveTrainerCheckpoint(resumed[0], third)).rejects.toThrow(/gathered state/);
      // Another number of ranks over the same global batch rows (3 x 2 for 2 x 3): each rank takes its share of the
      // whole state, sharded or not, and the two go on alike; the state they load is the file's to the bit.
      const three = rankTrainers(3, { shardOptimizer: true, dtype: "bf16" });
      const threePlain = rankTrainers(3, { dtype: "bf16" });
      await Promise.all([...three, ...threePlain].map((t) => loadTrainerCheckpoint(t, file)));
      // (Reading the state gathers it through the gradient buffer, where until the first step the weights wait to be shared.)
      const [w3] = await Promise.all(three.map((t) => t.readParameters("master")));
      expect(maxAbsDiff(w3, await threePlain[0].readParameters("master"))).toBe(0);
      const [v3] = await Promise.all(three.map((t) => t.readParameters("v")));
      expect(maxAbsDiff(v3, await threePlain[0].readParameters("v"))).toBe(0);
      const [m3] = await Promise.all(three.map((t) => t.readParameters("m")));
      expect(maxAbsDiff(m3, await threePlain[0].readParameters("m"))).toBe(0);
      expect(maxAbsDiff(await three[2].readParameters("params"), await threePlain[0].readParameters("params"))).toBe(0);
      for (let step = 3; step < 6; step++) {
        const b = globalBatch(step, config.model.vocabSize);
        const [p, s] = [await stepAll(threePlain, b), await stepAll(three, b)];
        expect(Math.abs(s[0].loss - p[0].loss) / p[0].loss, `loss at step ${step + 1} on 3 ranks`).toBeLessThan(1e-6);
      }
      // 1 rank x 6 rows keeps the rows too; 1 rank x 3 does not, and is refused with the batch size that would.
      const refused = await loadTrainerCheckpoint(new Trainer(backend, { ...config, batchSize: 3, dtype: "bf16" }), file).catch((e: unknown) => e as Error);
      expect(refused.message).toMatch(/trained by 2 data-parallel ranks, this run has 1/);
      expect((refused as unknown as { hint: string }).hint).toMatch(/or with 1 at --batch-size 6 \(6 rows a global batch, as it was\)/);
      for (const t of [...three, ...threePlain]) t.dispose();
      for (const t of [...sharded, ...plain, ...resumed]) t.dispose();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
