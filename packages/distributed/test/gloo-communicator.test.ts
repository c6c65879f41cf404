import { spawn } from "node:child_process";
import readline from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { TrainingError, createReferenceBackend } from "@kiln/contract";
import { type Communicator, createGlooCommunicator, glooStatus } from "@kiln/distributed";
import { freePort } from "../src/free-port.js";
import { REDUCE_SCATTER_CASES, expectAllGathered, expectBf16SumRoundedOnce, expectedChunks, f32Operand, ownChunks, valuesOf } from "./support/collective-cases.js";

// Ranks of the gloo communicator in one process (each with its own backend and Gloo mesh) over loopback TCP.
// Without Gloo installed (libgloo-dev) the addon is not built: these tests then check the clear refusal only.
const gloo = glooStatus();
const withGloo = gloo.available ? describe : describe.skip;

let open: Communicator[] = [];
afterEach(async () => {
  await Promise.all(open.map((c) => c.close()));
  open = [];
});

async function group(worldSize: number, timeoutMs = 20_000): Promise<Communicator[]> {
  const port = await freePort();
  const comms = await Promise.all([...Array(worldSize).keys()].map((rank) => createGlooCommunicator({ rank, worldSize, host: "127.0.0.1", port, timeoutMs })));
  open.push(...comms);
  return comms;
}

withGloo("gloo communicator (Gloo TCP ring, host staging)", () => {
  it("all-reduces f32 to the same bits on every rank, within rounding of the exact sum; mean divides by the world size", async () => {
    const comms = await group(3);
    const n = 100_003; // not a multiple of the ring's slices
    const backends = comms.map(() => createReferenceBackend());
    const ats = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, n)));
    await Promise.all(comms.map((c, r) => c.allReduce(backends[r], ats[r], n, "f32", "sum")));
    const outs = await Promise.all(
      backends.map(async (b, r) => {
        const out = new Float32Array(n);
        await b.download(ats[r], out);
        return out;
      }),
    );
    for (let r = 1; r < 3; r++) expect(Buffer.from(outs[r].buffer).equals(Buffer.from(outs[0].buffer))).toBe(true);
    const inputs = [0, 1, 2].map((r) => valuesOf(r, n));
    let worst = 0;
    for (let i = 0; i < n; i++) {
      const exact = inputs[0][i] + inputs[1][i] + inputs[2][i];
      const magnitude = Math.abs(inputs[0][i]) + Math.abs(inputs[1][i]) + Math.abs(inputs[2][i]);
      worst = Math.max(worst, Math.abs(outs[0][i] - exact) / magnitude);
    }
    expect(worst).toBeLessThanOrEqual(2 ** -22); // two f32 additions, each within half an ulp
    await Promise.all(comms.map((c, r) => c.allReduce(backends[r], ats[r], n, "f32", "mean")));
    const mean = new Float32Array(n);
    await backends[1].download(ats[1], mean);
    // Every rank held outs[0]: three equal addends are summed exactly up to rounding, then divided by 3.
    expect(mean[7]).toBeCloseTo(outs[0][7], 6);
  });

  it("all-reduces bf16: widened, summed in f32, rounded once", async () => {
    await expectBf16SumRoundedOnce(await group(2));
  });

  it("broadcasts from any root, sums host numbers, and runs several collectives called at once in call order", async () => {
    const comms = await group(3);
    const backends = comms.map(() => createReferenceBackend());
    const ats = comms.map((_, r) => f32Operand(backends[r], Float32Array.of(r, r, r)));
    const results = await Promise.all(
      comms.map((c, r) =>
        Promise.all([c.broadcast(backends[r], ats[r], 12, 2), c.allReduceScalars(Float64Array.of(r, 0.5), "sum"), c.allReduceScalars(Float64Array.of(r), "mean"), c.barrier()]),
      ),
    );
    for (let r = 0; r < 3; r++) {
      const out = new Float32Array(3);
      await backends[r].download(ats[r], out);
      expect(Array.from(out)).toEqual([2, 2, 2]);
      expect(Array.from(results[r][1])).toEqual([3, 1.5]);
      expect(Array.from(results[r][2])).toEqual([1]);
    }
    expect(comms.map((c) => c.kind)).toEqual(["gloo", "gloo", "gloo"]);
  });

  for (const size of [2, 3]) {
    it(`reduce-scatters over ${size} ranks: each chunk added along the ring from the rank after its owner, bf16 rounded once, the same bits every run`, async () => {
      const comms = await group(size);
      const ring = (c: number) => Array.from({ length: size }, (_, k) => (c + 1 + k) % size);
      for (const { n, dtype, op } of REDUCE_SCATTER_CASES) {
        const first = await ownChunks(comms, n, dtype, (c, b, at) => c.reduceScatter(b, at, n, dtype, op));
        const again = await ownChunks(comms, n, dtype, (c, b, at) => c.reduceScatter(b, at, n, dtype, op));
        const expected = expectedChunks(size, n, dtype, op, ring);
        for (let r = 0; r < size; r++) {
          const what = `${op} of ${size} x ${n} ${dtype}, rank ${r}`;
          expect(Buffer.from(first[r]).equals(Buffer.from(again[r])), `${what}: run again`).toBe(true);
          expect(Buffer.from(first[r]).equals(Buffer.from(expected[r])), `${what}: against ring-order sums`).toBe(true);
        }
      }
    }, 120_000);

    it(`all-gathers odd byte counts over ${size} ranks`, async () => {
      const comms = await group(size);
      for (const bytes of [1, 3, 4099, 9_000_001]) await expectAllGathered(comms, bytes);
    });
  }

  it("keeps reduce-scatters, all-gathers and all-reduces called at once in call order", async () => {
    const comms = await group(3);
    const backends = comms.map(() => createReferenceBackend());
    const n = 1001;
    const scattered = comms.map((_, r) => f32Operand(backends[r], valuesOf(r, 3 * n)));
    const gathered = comms.map((_, r) => f32Operand(backends[r], Float32Array.from({ length: 3 * n }, (_, i) => (Math.floor(i / n) === r ? r + 1 : -1))));
    await Promise.all(comms.flatMap((c, r) => [c.reduceScatter(backends[r], scattered[r], n, "f32", "sum"), c.allGather(backends[r], gathered[r], 4 * n), c.barrier()]));
    const expected = expectedChunks(3, n, "f32", "sum", (c) => [1, 2, 3].map((k) => (c + k) % 3));
    for (let r = 0; r < 3; r++) {
      const chunk = new Uint8Array(4 * n);
      await backends[r].download({ buffer: scattered[r].buffer, byteOffset: 16 + r * 4 * n }, chunk);
      expect(Buffer.from(chunk).equals(Buffer.from(expected[r]))).toBe(true);
      const all = new Float32Array(3 * n);
      await backends[r].download(gathered[r], all);
      expect([all[0], all[n], all[2 * n], all[3 * n - 1]]).toEqual([1, 2, 3, 3]);
    }
  });

  type Collective = (c: Communicator, b: ReturnType<typeof createReferenceBackend>, at: ReturnType<typeof f32Operand>) => Promise<void>;
  const allReduce: Collective = (c, b, at) => c.allReduce(b, at, 4, "f32", "sum");
  const reduceScatter: Collective = (c, b, at) => c.reduceScatter(b, at, 2, "f32", "sum");
  const allGather: Collective = (c, b, at) => c.allGather(b, at, 8);
  it.each([
    ["killed with SIGKILL", "all-reduce", "SIGKILL", /rank 1 disconnected/, allReduce],
    ["stalled (SIGSTOP)", "all-reduce", "SIGSTOP", /rank 1 did not reach roll call/, allReduce],
    ["stalled (SIGSTOP)", "reduce-scatter", "SIGSTOP", /rank 1 did not reach roll call after a failed reduce-scatter/, reduceScatter],
    ["killed with SIGKILL", "all-gather", "SIGKILL", /rank 1 disconnected/, allGather],
  ] as const)("a rank %s fails the next collective (%s) on the others within the timeout (+ a roll call), naming it", async (_, _name, signal, says, collective) => {
    const port = await freePort();
    const timeoutMs = 3000;
    const child = spawn(process.execPath, [new URL("./support/gloo-rank.mjs", import.meta.url).pathname, "1", "2", String(port), String(timeoutMs)], { stdio: ["ignore", "pipe", "inherit"] });
    try {
      const comm = await createGlooCommunicator({ rank: 0, worldSize: 2, host: "127.0.0.1", port, timeoutMs });
      open.push(comm);
      const backend = createReferenceBackend();
      const at = f32Operand(backend, Float32Array.of(1, 2, 3, 4));
      const ready = new Promise<void>((resolve) => readline.createInterface({ input: child.stdout! }).on("line", (l) => l === "ready" && resolve()));
      await Promise.all([comm.allReduce(backend, at, 4, "f32", "sum"), ready]);
      child.kill(signal);
      const started = Date.now();
      const err = await collective(comm, backend, at).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(TrainingError);
      expect((err as TrainingError).message).toMatch(says);
      expect(String((err as TrainingError).where)).toMatch(/rank 1 of 2/);
      expect(Date.now() - started).toBeLessThan(2 * timeoutMs + 1000);
    } finally {
      child.kill("SIGKILL");
    }
  }, 20_000);
});

describe("gloo communicator without Gloo", () => {
  it.runIf(!gloo.available)("refuses with what to install", async () => {
    await expect(createGlooCommunicator({ rank: 0, worldSize: 2, host: "127.0.0.1", port: await freePort(), timeoutMs: 1000 })).rejects.toThrow(/libgloo-dev/);
  });
  it("says whether it is available", () => {
    expect(gloo.available ? gloo.path : gloo.reason).toMatch(gloo.available ? /kiln_gloo\.node$/ : /Gloo/);
  });
});
