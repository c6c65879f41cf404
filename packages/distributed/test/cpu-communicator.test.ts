import { afterEach, describe, expect, it } from "vitest";
import { TrainingError, createReferenceBackend } from "@kiln/contract";
import { type Communicator, createCpuCommunicator, sharedMemoryStatus } from "@kiln/distributed";
import { freePort } from "../src/free-port.js";
import { expectBf16SumRoundedOnce, f32Operand, valuesOf } from "./support/collective-cases.js";

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
