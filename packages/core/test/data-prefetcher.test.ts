import { describe, expect, it } from "vitest";
import { BatchSampler, Prefetcher, openTokenDataset, type TokenDataset } from "../src/data/index.js";
import { countingIds, tempDir, writeU32File } from "./data-fixtures.js";

async function countingDataset(tokens: number): Promise<TokenDataset> {
  const dir = await tempDir();
  return openTokenDataset(await writeU32File(dir, "count.bin", countingIds(tokens)), { vocabSize: tokens });
}

const opts = { batchSize: 3, seqLen: 8, seed: 11, valFraction: 0 };
const snapshot = (b: { ids: Int32Array; targets: Int32Array }) => ({ ids: [...b.ids], targets: [...b.targets] });

describe("Prefetcher", () => {
  it("yields the same batches as the sampler alone, in the same order", async () => {
    const data = await countingDataset(8 * 50 + 1);
    const direct = new BatchSampler(data, opts);
    const expected = [];
    for (let i = 0; i < 30; i++) expected.push(snapshot(await direct.next()));

    const prefetcher = new Prefetcher(new BatchSampler(data, opts), 3);
    const got = [];
    for (let i = 0; i < 30; i++) got.push(snapshot(await prefetcher.next()));
    expect(got).toEqual(expected);
    await prefetcher.close();
    await data.close();
  });

  it("reuses depth + 1 buffers instead of allocating per step", async () => {
    const data = await countingDataset(8 * 50 + 1);
    const prefetcher = new Prefetcher(new BatchSampler(data, opts), 2);
    const seen = new Set<Int32Array>();
    for (let i = 0; i < 20; i++) seen.add((await prefetcher.next()).ids);
    expect(seen.size).toBe(3);
    await prefetcher.close();
    await data.close();
  });

  it("keeps reads in flight while the consumer holds a batch", async () => {
    const data = await countingDataset(8 * 50 + 1);
    let started = 0;
    const counting: TokenDataset = {
      ...data,
      path: data.path,
      format: data.format,
      tokenCount: data.tokenCount,
      sidecar: data.sidecar,
      read: (s, c, into) => ((started += 1), data.read(s, c, into)),
      close: () => data.close(),
    };
    const prefetcher = new Prefetcher(new BatchSampler(counting, opts), 4);
    expect(started).toBe(4 * opts.batchSize); // reads began before anyone asked
    await prefetcher.next();
    expect(started).toBe(5 * opts.batchSize); // one more started as soon as a buffer came free
    await prefetcher.close();
    await data.close();
  });

  it("reports the cursor of the batches consumed, not of those read ahead, and resumes from it", async () => {
    const data = await countingDataset(8 * 20 + 1);
    const reference = new Prefetcher(new BatchSampler(data, opts), 2);
    const all = [];
    for (let i = 0; i < 16; i++) all.push(snapshot(await reference.next()));

    const sampler = new BatchSampler(data, opts);
    const first = new Prefetcher(sampler, 3);
    for (let i = 0; i < 9; i++) await first.next();
    const cursor = first.getCursor();
    expect(cursor).toEqual({ epoch: 1, index: 7 }); // 27 windows of 20 per epoch
    expect(first.epochProgress).toBeCloseTo(1.35);
    expect(sampler.getCursor()).not.toEqual(cursor); // the sampler itself has run ahead
    await first.close();

    const resumed = new Prefetcher(new BatchSampler(data, opts), 1);
    await resumed.setCursor(cursor);
    const rest = [];
    for (let i = 9; i < 16; i++) rest.push(snapshot(await resumed.next()));
    expect(rest).toEqual(all.slice(9));
    await resumed.close();
    await reference.close();
    await data.close();
  });

  it("passes on a read error from next()", async () => {
    const data = await countingDataset(8 * 20 + 1);
    const broken: TokenDataset = { ...data, path: data.path, format: data.format, tokenCount: data.tokenCount, sidecar: undefined, read: () => Promise.reject(new Error("disk gone")), close: () => data.close() };
    const prefetcher = new Prefetcher(new BatchSampler(broken, opts), 2);
    await expect(prefetcher.next()).rejects.toThrow("disk gone");
    await prefetcher.close();
    await data.close();
  });
});
