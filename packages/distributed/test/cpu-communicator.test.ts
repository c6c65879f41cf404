import { afterEach, describe, expect, it } from "vitest";
import { TrainingError, createReferenceBackend } from "@kiln/contract";
import { type Communicator, createCpuCommunicator, sharedMemoryStatus } from "@kiln/distributed";
import { freePort } from "../src/free-port.js";
import { REDUCE_SCATTER_CASES, expectAllGathered, expectBf16SumRoundedOnce, expectedChunks, f32Operand, ownChunks, valuesOf } from "./support/collective-cases.js";

// Ranks of the cpu communicator in one process, joined over loopback TCP: each rank has its own backend.
let open: Communicator[] = [];
afterEach(async () => {
  await Promise.all(open.map((c) => c.close()));
  open = [];
});

async function group(worldSize: number, timeoutMs = 5000, ranks = [...Array(worldSize).keys()], sharedMemory = true): Promise<Communicator[]> {
  const port = await freePort();
  const comms = await Promise.all(ranks.map((rank) => createCpuCommunicator({ rank, worldSize, host: "127.0.0.1", port, timeoutMs, sharedMemory })));
  open.push(...comms);
  return comms;
}

const shmAvailable = sharedMemoryStatus().available;

describe.each([
  ["shared memory", true],
  ["TCP through rank 0", false],
] as const)("cpu communicator (host staging, sums through %s)", (path, sharedMemory) => {
  it.runIf(shmAvailable || !sharedMemory)("all-reduces f32 as the sum in rank order, the same bits on every rank; mean divides by the world size", async () => {
    const comms = await group(3, 5000, undefined, sharedMemory);
    for (const c of comms) expect(c.dataPath).toMatch(new RegExp(`^${path}`));
    const n = 10_001;
    const backends = comms.map(() => createReferenceBackend());
    const ats = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, n)));
    await Promise.all(comms.map((c, r) => c.allReduce(backends[r], ats[r], n, "f32", "sum")));
    const expected = valuesOf(0, n);
    for (let r = 1; r < 3; r++) {
      const x = valuesOf(r, n);
      for (let i = 0; i < n; i++) expected[i] += x[i];
    }
    for (let r = 0; r < 3; r++) {
      const out = new Float32Array(n);
      await backends[r].download(ats[r], out);
      expect(Buffer.from(out.buffer).equals(Buffer.from(expected.buffer))).toBe(true);
    }
    await Promise.all(comms.map((c, r) => c.allReduce(backends[r], ats[r], n, "f32", "mean")));
    const mean = new Float32Array(n);
    await backends[2].download(ats[2], mean);
    // Every rank now holds `expected`: the mean of three copies is their rank-order sum over 3.
    expect(mean[5]).toBe(Math.fround(Math.fround(Math.fround(expected[5] + expected[5]) + expected[5]) / 3));
  });

  it.runIf(shmAvailable || !sharedMemory)("all-reduces bf16: widened, summed in f32, rounded once", async () => {
    await expectBf16SumRoundedOnce(await group(2, 5000, undefined, sharedMemory));
  });

  it.runIf(shmAvailable || !sharedMemory)("keeps all-reduces called at once in call order, over several chunks of the segment", async () => {
    const comms = await group(2, 5000, undefined, sharedMemory);
    const backends = comms.map(() => createReferenceBackend());
    const sizes = [1_500_001, 17, 1_048_576];
    const ats = comms.map((_, r) => sizes.map((n, k) => f32Operand(backends[r], valuesOf(r + k, n))));
    await Promise.all(comms.flatMap((c, r) => sizes.map((n, k) => c.allReduce(backends[r], ats[r][k], n, "f32", "sum"))));
    for (const [k, n] of sizes.entries()) {
      const expected = valuesOf(k, n);
      const x = valuesOf(1 + k, n);
      for (let i = 0; i < n; i++) expected[i] += x[i];
      for (let r = 0; r < 2; r++) {
        const out = new Float32Array(n);
        await backends[r].download(ats[r][k], out);
        expect(Buffer.from(out.buffer).equals(Buffer.from(expected.buffer)), `operand ${k} on rank ${r}`).toBe(true);
      }
    }
  });

  it.runIf(shmAvailable || !sharedMemory)("fails within the timeout, naming the rank, when one stalls in an all-reduce", async () => {
    const comms = await group(3, 400, undefined, sharedMemory);
    const backends = comms.map(() => createReferenceBackend());
    const ats = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, 8)));
    const started = Date.now();
    // Rank 1 never calls the collective.
    const errors = await Promise.all([0, 2].map((r) => comms[r].allReduce(backends[r], ats[r], 8, "f32", "sum").catch((e: unknown) => e)));
    expect(Date.now() - started).toBeLessThan(3000);
    for (const e of errors) expect((e as Error).message).toMatch(/^rank 1 did not reach all-reduce \(sum\) of 8 f32 .*within 0\.4 s/);
    // Over TCP the rank's host is named; through shared memory every rank is on this one.
    expect((errors[1] as TrainingError).where).toBe(`data-parallel rank 1 of 3${sharedMemory ? "" : " on 127.0.0.1"}, seen by rank 2`);
  });
});

describe.each([
  ["shared memory", true],
  ["TCP through rank 0", false],
] as const)("cpu communicator: reduce-scatter and all-gather through %s", (path, sharedMemory) => {
  const run = shmAvailable || !sharedMemory;
  for (const size of [2, 3]) {
    it.runIf(run)(`reduce-scatters over ${size} ranks to the bits of each rank's chunk of allReduce (rank-order f32 sums, bf16 rounded once), sum and mean`, async () => {
      const comms = await group(size, 20_000, undefined, sharedMemory);
      for (const c of comms) expect(c.dataPath).toMatch(new RegExp(`^${path}`));
      for (const { n, dtype, op } of REDUCE_SCATTER_CASES) {
        const scattered = await ownChunks(comms, n, dtype, (c, b, at) => c.reduceScatter(b, at, n, dtype, op));
        const reduced = await ownChunks(comms, n, dtype, (c, b, at) => c.allReduce(b, at, size * n, dtype, op));
        const expected = expectedChunks(size, n, dtype, op, () => [...Array(size).keys()]);
        for (let r = 0; r < size; r++) {
          const what = `${op} of ${size} x ${n} ${dtype}, rank ${r}`;
          expect(Buffer.from(scattered[r]).equals(Buffer.from(reduced[r])), `${what}: against allReduce`).toBe(true);
          expect(Buffer.from(scattered[r]).equals(Buffer.from(expected[r])), `${what}: against rank-order sums`).toBe(true);
        }
      }
    }, 120_000);

    it.runIf(run)(`all-gathers odd byte counts over ${size} ranks`, async () => {
      const comms = await group(size, 20_000, undefined, sharedMemory);
      for (const bytes of [1, 3, 4099, 9_000_001]) await expectAllGathered(comms, bytes);
    }, 60_000);
  }

  it.runIf(run)("keeps reduce-scatters, all-gathers and all-reduces called at once in call order", async () => {
    const comms = await group(2, 5000, undefined, sharedMemory);
    const backends = comms.map(() => createReferenceBackend());
    const n = 1001;
    const scattered = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, 2 * n)));
    const gathered = comms.map((_, r) => f32Operand(backends[r], Float32Array.from({ length: 2 * n }, (_, i) => (i < n) === (r === 0) ? r + 1 : -1)));
    const reduced = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, n)));
    await Promise.all(
      comms.flatMap((c, r) => [c.reduceScatter(backends[r], scattered[r], n, "f32", "sum"), c.allGather(backends[r], gathered[r], 4 * n), c.allReduce(backends[r], reduced[r], n, "f32", "mean")]),
    );
    const expected = expectedChunks(2, n, "f32", "sum", () => [0, 1]);
    for (let r = 0; r < 2; r++) {
      const chunk = new Uint8Array(4 * n);
      await backends[r].download({ buffer: scattered[r].buffer, byteOffset: 16 + r * 4 * n }, chunk);
      expect(Buffer.from(chunk).equals(Buffer.from(expected[r]))).toBe(true);
      const all = new Float32Array(2 * n);
      await backends[r].download(gathered[r], all);
      expect([all[0], all[n - 1], all[n], all[2 * n - 1]]).toEqual([1, 1, 2, 2]);
    }
  });

  it.runIf(run)("fails within the timeout, naming the rank, when one stalls in a reduce-scatter", async () => {
    const comms = await group(3, 400, undefined, sharedMemory);
    const backends = comms.map(() => createReferenceBackend());
    const ats = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, 24)));
    const errors = await Promise.all([0, 2].map((r) => comms[r].reduceScatter(backends[r], ats[r], 8, "f32", "sum").catch((e: unknown) => e)));
    for (const e of errors) expect((e as Error).message).toMatch(/^rank 1 did not reach reduce-scatter \(sum\) of 3 x 8 f32 .*within 0\.4 s/);
  });
});

describe("cpu communicator (TCP control)", () => {
  it("broadcasts from any root, sums host numbers, and keeps several collectives in flight in call order", async () => {
    const comms = await group(3);
    const backends = comms.map(() => createReferenceBackend());
    const ats = comms.map((_, r) => f32Operand(backends[r], Float32Array.of(r, r, r)));
    const inFlight = comms.map((c, r) =>
      Promise.all([c.broadcast(backends[r], ats[r], 12, 2), c.allReduceScalars(Float64Array.of(r, 0.5), "sum"), c.allReduceScalars(Float64Array.of(r), "mean"), c.barrier()]),
    );
    const results = await Promise.all(inFlight);
    for (let r = 0; r < 3; r++) {
      const out = new Float32Array(3);
      await backends[r].download(ats[r], out);
      expect(Array.from(out)).toEqual([2, 2, 2]);
      expect(Array.from(results[r][1])).toEqual([3, 1.5]);
      expect(Array.from(results[r][2])).toEqual([1]);
    }
  });

  it("fails every other rank, naming the rank, when one disconnects", async () => {
    const comms = await group(3);
    await comms[2].close();
    const errors = await Promise.all(comms.slice(0, 2).map((c) => c.allReduceScalars(Float64Array.of(1), "sum").catch((e: unknown) => e)));
    for (const [r, e] of errors.entries()) {
      expect(e).toBeInstanceOf(TrainingError);
      expect((e as TrainingError).message).toMatch(/^rank 2 disconnected/);
      expect((e as TrainingError).where).toBe(`data-parallel rank 2 of 3 on 127.0.0.1, seen by rank ${r}`);
    }
  });

  it("fails within the timeout, naming the rank, when one stalls", async () => {
    const comms = await group(3, 400);
    const started = Date.now();
    // Rank 1 never calls the collective.
    const errors = await Promise.all([comms[0], comms[2]].map((c) => c.barrier().catch((e: unknown) => e)));
    expect(Date.now() - started).toBeLessThan(3000);
    for (const e of errors) expect((e as Error).message).toMatch(/^rank 1 did not reach barrier \(collective #\d+\) within 0\.4 s/);
    expect((errors[1] as TrainingError).where).toBe("data-parallel rank 1 of 3 on 127.0.0.1, seen by rank 2");
  });

  it("names the ranks that never connected", async () => {
    const port = await freePort();
    const started = createCpuCommunicator({ rank: 0, worldSize: 3, host: "127.0.0.1", port, timeoutMs: 500 });
    const one = await Promise.all([started.catch((e: unknown) => e), createCpuCommunicator({ rank: 1, worldSize: 3, host: "127.0.0.1", port, timeoutMs: 5000 }).catch((e: unknown) => e)]);
    expect((one[0] as Error).message).toMatch(/^rank 2 did not connect to 127\.0\.0\.1:\d+ within 0\.5 s/);
    expect(one[1]).toBeInstanceOf(Error);
  });

  it("refuses a rank whose world size differs", async () => {
    const port = await freePort();
    const zero = createCpuCommunicator({ rank: 0, worldSize: 2, host: "127.0.0.1", port, timeoutMs: 1000 }).catch((e: unknown) => e);
    const other = await createCpuCommunicator({ rank: 1, worldSize: 3, host: "127.0.0.1", port, timeoutMs: 3000 }).catch((e: unknown) => e);
    expect((other as Error).message).toMatch(/rank 0 refused a connection: it has WORLD_SIZE 3, rank 0 has 2/);
    expect((await zero) as Error).toBeInstanceOf(TrainingError);
  });
});
