import { afterEach, describe, expect, it } from "vitest";
import { TrainingError, createReferenceBackend } from "@kiln/contract";
import { type Communicator, type DeviceCollectives, createNcclCommunicator } from "@kiln/distributed";
import { freePort } from "../src/free-port.js";

// The nccl communicator's control side, with device collectives faked: the unique id
// travels from rank 0, host numbers and barriers go through the star group, device
// collectives go to the joined device, and a failed device collective names a rank.
let open: Communicator[] = [];
afterEach(async () => {
  await Promise.all(open.map((c) => c.close()));
  open = [];
});

const ID = Uint8Array.from({ length: 128 }, (_, i) => (i * 7) % 256);

async function group(worldSize: number, uniqueId = () => ID, timeoutMs = 3000) {
  const port = await freePort();
  const comms = await Promise.all([...Array(worldSize).keys()].map((rank) => createNcclCommunicator({ rank, worldSize, host: "127.0.0.1", port, timeoutMs, uniqueId })));
  open.push(...comms);
  return comms;
}

/** Device collectives that log their calls and run `behaviour`. */
function fakeDevice(log: string[], behaviour: () => Promise<void> = async () => undefined): DeviceCollectives {
  return {
    allReduce: async (at, n, dtype, op) => {
      log.push(`allReduce ${at.byteOffset} ${n} ${dtype} ${op}`);
      await behaviour();
    },
    broadcast: async (at, bytes, root) => {
      log.push(`broadcast ${at.byteOffset} ${bytes} ${root}`);
      await behaviour();
    },
    reduceScatter: async (at, n, dtype, op) => {
      log.push(`reduceScatter ${at.byteOffset} ${n} ${dtype} ${op}`);
      await behaviour();
    },
    allGather: async (at, bytes) => {
      log.push(`allGather ${at.byteOffset} ${bytes}`);
      await behaviour();
    },
    close: () => log.push("close"),
  };
}

describe("nccl communicator (control side)", () => {
  it("hands rank 0's unique id to every rank, device collectives to the device, host numbers and barriers to the star group", async () => {
    const comms = await group(3);
    const ids: Uint8Array[] = [];
    const logs = comms.map(() => [] as string[]);
    await Promise.all(comms.map((c, r) => c.joinDevice(async (id) => (ids.push(id), fakeDevice(logs[r])))));
    for (const id of ids) expect(Array.from(id)).toEqual(Array.from(ID));
    const backend = createReferenceBackend();
    const buffer = backend.alloc(64);
    await Promise.all(comms.map((c) => c.allReduce(backend, { buffer, byteOffset: 16 }, 8, "bf16", "mean")));
    await Promise.all(comms.map((c) => c.broadcast(backend, { buffer, byteOffset: 0 }, 64, 0)));
    await Promise.all(comms.map((c) => c.reduceScatter(backend, { buffer, byteOffset: 4 }, 5, "f32", "sum")));
    await Promise.all(comms.map((c) => c.allGather(backend, { buffer, byteOffset: 1 }, 21)));
    const sums = await Promise.all(comms.map((c, r) => c.allReduceScalars(Float64Array.of(r, 1), "sum")));
    await Promise.all(comms.map((c) => c.barrier()));
    for (const s of sums) expect(Array.from(s)).toEqual([3, 3]);
    for (const log of logs) expect(log).toEqual(["allReduce 16 8 bf16 mean", "broadcast 0 64 0", "reduceScatter 4 5 f32 sum", "allGather 1 21"]);
    expect(comms[0].kind).toBe("nccl");
  });

  it("stops every rank with rank 0's reason when it cannot make the unique id", async () => {
    const port = await freePort();
    const failing = () => {
      throw new Error("NCCL is not installed here");
    };
    const results = await Promise.all(
      [0, 1].map((rank) => createNcclCommunicator({ rank, worldSize: 2, host: "127.0.0.1", port, timeoutMs: 3000, uniqueId: failing }).catch((e: unknown) => e)),
    );
    for (const e of results) {
      expect(e).toBeInstanceOf(TrainingError);
      expect((e as TrainingError).message).toBe("rank 0 could not make NCCL's unique id: NCCL is not installed here");
    }
  });

  it("names the rank that stalled when a device collective fails (NCCL's timeout), after a roll call", async () => {
    const comms = await group(3, () => ID, 500);
    const logs = comms.map(() => [] as string[]);
    // Every rank's device call times out, as NCCL's would when one rank never joins the collective.
    const timesOut = () => new Promise<void>((_, reject) => setTimeout(() => reject(new Error("NCCL collective timed out")), 100));
    await Promise.all(comms.map((c, r) => c.joinDevice(async () => fakeDevice(logs[r], timesOut))));
    const backend = createReferenceBackend();
    const buffer = backend.alloc(16);
    // Rank 2 stalls: it never calls the collective, nor the roll call that follows.
    const errors = await Promise.all([0, 1].map((r) => comms[r].allReduce(backend, { buffer, byteOffset: 0 }, 4, "f32", "sum").catch((e: unknown) => e)));
    for (const e of errors) {
      expect(e).toBeInstanceOf(TrainingError);
      expect((e as TrainingError).message).toMatch(/^rank 2 did not reach roll call after a failed all-reduce \(sum\) of 4 f32 .*; NCCL's all-reduce \(sum\) of 4 f32 failed: NCCL collective timed out$/);
      expect((e as TrainingError).where).toMatch(/^data-parallel rank 2 of 3/);
    }
  });

  it("refuses a device collective before the device joined", async () => {
    const [a] = await group(1);
    const backend = createReferenceBackend();
    await expect(a.allReduce(backend, { buffer: backend.alloc(4), byteOffset: 0 }, 1, "f32", "sum")).rejects.toThrow(/before joinDevice/);
  });
});
