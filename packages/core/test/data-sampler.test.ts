import { describe, expect, it } from "vitest";
import { DataError } from "@kiln/contract";
import { BatchSampler, WindowPermutation, openTokenDataset, splitTokens, windowsIn, type TokenDataset } from "../src/data/index.js";
import { countingIds, tempDir, writeU32File } from "./data-fixtures.js";

/** A dataset whose token at position i is i: every window says where it starts. */
async function countingDataset(tokens: number): Promise<TokenDataset> {
  const dir = await tempDir();
  return openTokenDataset(await writeU32File(dir, "count.bin", countingIds(tokens)), { vocabSize: tokens });
}

async function epochStarts(sampler: BatchSampler, batches: number): Promise<number[]> {
  const starts: number[] = [];
  for (let b = 0; b < batches; b++) {
    const batch = await sampler.next();
    for (let row = 0; row < sampler.batchSize; row++) starts.push(batch.ids[row * sampler.seqLen]);
  }
  return starts;
}

describe("WindowPermutation", () => {
  it("is a permutation of [0, n) for awkward sizes", () => {
    for (const n of [1, 2, 3, 4, 5, 17, 100, 1023, 1025, 4096]) {
      const p = new WindowPermutation(n, 42, 3);
      const seen = new Set(Array.from({ length: n }, (_, i) => p.at(i)));
      expect(seen.size).toBe(n);
      expect(Math.max(...seen)).toBe(n - 1);
    }
  });

  it("depends only on (seed, epoch)", () => {
    const order = (seed: number, epoch: number) => Array.from({ length: 200 }, (_, i) => new WindowPermutation(200, seed, epoch).at(i));
    expect(order(7, 0)).toEqual(order(7, 0));
    expect(order(7, 1)).not.toEqual(order(7, 0));
    expect(order(8, 0)).not.toEqual(order(7, 0));
    expect(order(7, 0)).not.toEqual(Array.from({ length: 200 }, (_, i) => i));
  });
});

describe("BatchSampler", () => {
  it("cuts non-overlapping windows with targets one token ahead of ids", async () => {
    const data = await countingDataset(1000);
    const sampler = new BatchSampler(data, { batchSize: 4, seqLen: 16, seed: 1, valFraction: 0 });
    expect(sampler.windowCount).toBe(windowsIn(1000, 16));
    expect(sampler.windowCount).toBe(62);
    const batch = await sampler.next();
    for (let row = 0; row < 4; row++) {
      const s = batch.ids[row * 16];
      expect(s % 16).toBe(0);
      for (let t = 0; t < 16; t++) {
        expect(batch.ids[row * 16 + t]).toBe(s + t);
        expect(batch.targets[row * 16 + t]).toBe(s + t + 1);
      }
    }
    await data.close();
  });

  it("visits every window once per epoch, in a seeded order that changes with the epoch", async () => {
    const data = await countingDataset(16 * 40 + 1);
    const sampler = new BatchSampler(data, { batchSize: 5, seqLen: 16, seed: 9, valFraction: 0 });
    expect(sampler.windowCount).toBe(40);
    const epoch0 = await epochStarts(sampler, 8);
    const epoch1 = await epochStarts(sampler, 8);
    const grid = Array.from({ length: 40 }, (_, i) => i * 16);
    expect([...epoch0].sort((a, b) => a - b)).toEqual(grid);
    expect([...epoch1].sort((a, b) => a - b)).toEqual(grid);
    expect(epoch1).not.toEqual(epoch0);
    expect(epoch0).not.toEqual(grid);

    const again = new BatchSampler(data, { batchSize: 5, seqLen: 16, seed: 9, valFraction: 0 });
    expect(await epochStarts(again, 16)).toEqual([...epoch0, ...epoch1]);
    const otherSeed = new BatchSampler(data, { batchSize: 5, seqLen: 16, seed: 10, valFraction: 0 });
    expect(await epochStarts(otherSeed, 8)).not.toEqual(epoch0);
    await data.close();
  });

  it("continues identically from a saved cursor, across epoch boundaries", async () => {
    const data = await countingDataset(8 * 30 + 1);
    const opts = { batchSize: 4, seqLen: 8, seed: 3, valFraction: 0 };
    const straight = new BatchSampler(data, opts);
    const expected = await epochStarts(straight, 25);

    const first = new BatchSampler(data, opts);
    const head = await epochStarts(first, 11);
    const saved = JSON.parse(JSON.stringify(first.getCursor()));
    expect(saved).toEqual({ epoch: 1, index: 14 });
    expect(first.epochProgress).toBeCloseTo(1 + 14 / 30);

    const resumed = new BatchSampler(data, opts);
    resumed.setCursor(saved);
    expect([...head, ...(await epochStarts(resumed, 14))]).toEqual(expected);
    await data.close();
  });

  it("refuses a cursor that does not fit the data", async () => {
    const data = await countingDataset(100);
    const sampler = new BatchSampler(data, { batchSize: 2, seqLen: 8, seed: 1, valFraction: 0 });
    expect(() => sampler.setCursor({ epoch: 0, index: sampler.windowCount })).toThrow(DataError);
    expect(() => sampler.setCursor({ epoch: -1, index: 0 })).toThrow(DataError);
    await data.close();
  });

  it("keeps the last fraction of the stream for validation, apart from training", async () => {
    const data = await countingDataset(10_000);
    const train = new BatchSampler(data, { batchSize: 2, seqLen: 32, seed: 1, valFraction: 0.1 });
    const val = new BatchSampler(data, { batchSize: 2, seqLen: 32, seed: 1, split: "val", valFraction: 0.1 });
    expect(train.splitTokens + val.splitTokens).toBe(10_000);
    expect(val.splitStart).toBe(9000);
    const trainStarts = await epochStarts(train, Math.floor(train.windowCount / 2));
    const valStarts = await epochStarts(val, Math.floor(val.windowCount / 2));
    expect(Math.max(...trainStarts) + 32 + 1).toBeLessThanOrEqual(9000);
    expect(Math.min(...valStarts)).toBeGreaterThanOrEqual(9000);
    await data.close();
  });

  it("gives validation at least one window when the data allows, and none when it does not", () => {
    expect(splitTokens(100_000, 64, 0.01, "x")).toEqual({ trainTokens: 99_000, valTokens: 1000 });
    expect(splitTokens(1000, 64, 0.01, "x")).toEqual({ trainTokens: 935, valTokens: 65 });
    expect(splitTokens(100, 64, 0.01, "x")).toEqual({ trainTokens: 100, valTokens: 0 });
    expect(splitTokens(130, 64, 0.5, "x")).toEqual({ trainTokens: 65, valTokens: 65 });
    expect(splitTokens(130, 64, 0.9, "x")).toEqual({ trainTokens: 65, valTokens: 65 });
    expect(splitTokens(500, 64, 0, "x")).toEqual({ trainTokens: 500, valTokens: 0 });
  });

  it("says clearly when the data is too small for one window, or for a validation split", async () => {
    const data = await countingDataset(50);
    expect(() => new BatchSampler(data, { batchSize: 1, seqLen: 64, seed: 1 })).toThrow(/holds 50 tokens, too few for even one training sequence of 64 tokens/);
    expect(() => new BatchSampler(data, { batchSize: 1, seqLen: 32, seed: 1, split: "val" })).toThrow(/too small for a validation split/);
    expect(() => new BatchSampler(data, { batchSize: 1, seqLen: 8, seed: 1, split: "val", valFraction: 0 })).toThrow(/no validation data/);
    await data.close();
  });

  it("splits each global batch between ranks without overlap", async () => {
    const data = await countingDataset(8 * 64 + 1);
    const opts = { batchSize: 4, seqLen: 8, seed: 5, valFraction: 0, worldSize: 2 };
    const single = await epochStarts(new BatchSampler(data, { ...opts, worldSize: 1, batchSize: 8 }), 8);
    const r0 = new BatchSampler(data, { ...opts, rank: 0 });
    const r1 = new BatchSampler(data, { ...opts, rank: 1 });
    const got: number[] = [];
    for (let b = 0; b < 8; b++) got.push(...(await epochStarts(r0, 1)), ...(await epochStarts(r1, 1)));
    expect(got).toEqual(single);
    expect(r0.getCursor()).toEqual(r1.getCursor());
    await data.close();
  });

  it("reads windows in file order when shuffle is off", async () => {
    const data = await countingDataset(8 * 10 + 1);
    const sampler = new BatchSampler(data, { batchSize: 5, seqLen: 8, seed: 1, valFraction: 0, shuffle: false });
    expect(await epochStarts(sampler, 2)).toEqual(Array.from({ length: 10 }, (_, i) => i * 8));
    await data.close();
  });
});
