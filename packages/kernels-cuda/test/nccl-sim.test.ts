import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Backend, DeviceError, type FloatDType, KernelArgumentError, createReferenceBackend, decodeElements, encodeElements } from "@kiln/contract";
import { createCudaSimBackend, ncclUniqueId, openNcclCollectives } from "../src/index.js";
import { buildFakeNccl, fakeNcclSkipReason, type FakeNcclOptions } from "./support/fake-nccl.js";
import { simulatorSkipReason } from "./support/simulator.js";

// NCCL collectives on the simulator's device buffers through a fake libnccl.so.2
// (test/support/fake_nccl.c, world size 1: the fake checks and logs its arguments;
// a sum or mean over one rank leaves the data as it is). What this covers: the
// library and communicator plumbing, argument and enum values as NCCL receives
// them, that kernels enqueued after a collective see its result, and the error
// and timeout paths. What it cannot: real cross-GPU data movement or stream overlap
// (the simulator runs work when it is issued).
const skip = simulatorSkipReason() ?? fakeNcclSkipReason();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-nccl-sim-"));
const saved = process.env.KILN_NCCL_LIBRARY;
let fakes = 0;

/** A fresh fake (its own file, so its knobs hold) as the NCCL to use, and its call log. */
function useFake(options: Omit<FakeNcclOptions, "log"> = {}): { log: () => string[] } {
  const sub = path.join(dir, `fake${++fakes}`);
  const log = path.join(sub, "calls.log");
  process.env.KILN_NCCL_LIBRARY = buildFakeNccl(dir, `fake${fakes}/libnccl.so.2`, { ...options, log });
  return { log: () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n") : []) };
}

afterEach(() => {
  if (saved === undefined) delete process.env.KILN_NCCL_LIBRARY;
  else process.env.KILN_NCCL_LIBRARY = saved;
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function upload(backend: Backend, values: number[], dtype: FloatDType, padBytes = 0) {
  const bytes = new Uint8Array(padBytes + values.length * (dtype === "f32" ? 4 : 2));
  encodeElements(values, dtype, bytes.subarray(padBytes));
  const buf = backend.alloc(bytes.length);
  backend.upload(buf, bytes);
  return buf;
}

async function download(backend: Backend, at: Parameters<Backend["download"]>[0], n: number, dtype: FloatDType): Promise<number[]> {
  const bytes = new Uint8Array(n * (dtype === "f32" ? 4 : 2));
  await backend.download(at, bytes);
  return Array.from(decodeElements(bytes, dtype, n));
}

describe.skipIf(skip)(`NCCL collectives on the simulator${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let backend: Backend;
  beforeAll(() => {
    backend = createCudaSimBackend();
  });
  afterAll(() => backend?.dispose());

  const open = (timeoutMs?: number) => openNcclCollectives(backend, { uniqueId: ncclUniqueId(), rank: 0, worldSize: 1, ...(timeoutMs ? { timeoutMs } : {}) });

  for (const dtype of ["f32", "bf16"] as const) {
    it(`all-reduces ${dtype} in place (sum and mean), and a kernel enqueued after it reads the result`, async () => {
      const fake = useFake();
      const nccl = await open();
      expect([nccl.rank, nccl.worldSize]).toEqual([0, 1]);
      const values = Array.from({ length: 37 }, (_, i) => (i - 11) * 0.5);
      // A slice 8 bytes into the buffer: the collective must use the operand's address.
      const buf = upload(backend, values, dtype, 8);
      const at = { buffer: buf, byteOffset: 8 };
      const summed = nccl.allReduce(at, values.length, dtype, "sum");
      backend.kernels.scale({ x: at, out: at, n: values.length, alpha: 2, dtype });
      await summed;
      await nccl.allReduce(at, values.length, dtype, "mean");
      expect(await download(backend, at, values.length, dtype)).toEqual(values.map((v) => 2 * v));
      nccl.close();
      const code = dtype === "f32" ? 7 : 9; // ncclFloat32, ncclBfloat16
      expect(fake.log()).toEqual([
        "init rank=0 nranks=1",
        `allReduce count=37 type=${code} op=0 inplace=1 stream=set`, // ncclSum
        `allReduce count=37 type=${code} op=4 inplace=1 stream=set`, // ncclAvg
        "destroy",
      ]);
      backend.free(buf);
    });
  }

  it("passes f16 as ncclFloat16 and broadcasts bytes as ncclInt8 from the root", async () => {
    const fake = useFake();
    const nccl = await open();
    const buf = upload(backend, [1, 2, 3, 4], "f16");
    await nccl.allReduce(buf, 4, "f16", "sum");
    await nccl.broadcast({ buffer: buf, byteOffset: 2 }, 6, 0);
    backend.kernels.scale({ x: buf, out: buf, n: 4, alpha: -1, dtype: "f16" });
    expect(await download(backend, buf, 4, "f16")).toEqual([-1, -2, -3, -4]);
    expect(fake.log().slice(1, 3)).toEqual(["allReduce count=4 type=6 op=0 inplace=1 stream=set", "broadcast count=6 type=0 root=0 inplace=1 stream=set"]);
    nccl.close();
    backend.free(buf);
  });

  it("reduce-scatters and all-gathers in place on one rank, passing NCCL the per-rank count, its dtype and op", async () => {
    const fake = useFake();
    const nccl = await open();
    const values = [3, -1.5, 0.25, 8, -6, 7, 2];
    const buf = upload(backend, values, "bf16", 6);
    const at = { buffer: buf, byteOffset: 6 };
    const scattered = nccl.reduceScatter(at, values.length, "bf16", "sum");
    backend.kernels.scale({ x: at, out: at, n: values.length, alpha: -2, dtype: "bf16" });
    await scattered;
    await nccl.reduceScatter(at, values.length, "bf16", "mean");
    await nccl.allGather({ buffer: buf, byteOffset: 7 }, 5);
    expect(await download(backend, at, values.length, "bf16")).toEqual(values.map((v) => -2 * v));
    const f = upload(backend, [1, 2, 3], "f32");
    await nccl.reduceScatter(f, 3, "f32", "mean");
    await nccl.reduceScatter(f, 3, "f16", "sum");
    await nccl.reduceScatter(f, 0, "f32", "sum"); // nothing to do: NCCL is not called
    await nccl.allGather(f, 0);
    nccl.close();
    expect(fake.log().slice(1)).toEqual([
      "reduceScatter count=7 type=9 op=0 inplace=1 stream=set",
      "reduceScatter count=7 type=9 op=4 inplace=1 stream=set",
      "allGather count=5 type=0 inplace=1 stream=set",
      "reduceScatter count=3 type=7 op=4 inplace=1 stream=set",
      "reduceScatter count=3 type=6 op=0 inplace=1 stream=set",
      "destroy",
    ]);
    backend.free(buf);
    backend.free(f);
  });

  it("checks reduce-scatter's and all-gather's arguments before NCCL sees them", async () => {
    const fake = useFake();
    const nccl = await open();
    const buf = backend.alloc(16);
    await expect(nccl.reduceScatter(buf, 5, "f32", "sum")).rejects.toThrow(/^reduceScatter of 1 x 5 f32 needs bytes \[0, 20\) of a 16-byte buffer$/);
    await expect(nccl.reduceScatter({ buffer: buf, byteOffset: 4 }, 4, "f32", "sum")).rejects.toThrow(KernelArgumentError);
    await expect(nccl.reduceScatter(buf, 1.5, "f32", "sum")).rejects.toThrow(/reduceScatter's element count \(per rank\) must be an integer between 0 and/);
    await expect(nccl.reduceScatter(buf, -1, "bf16", "sum")).rejects.toThrow(KernelArgumentError);
    await expect(nccl.reduceScatter(buf, 4, "i32" as FloatDType, "sum")).rejects.toThrow(/reduceScatter takes f32, bf16 or f16, not i32/);
    await expect(nccl.reduceScatter(buf, 4, "f32", "max" as "sum")).rejects.toThrow(/reduceScatter's op is "sum" or "mean", not max/);
    await expect(nccl.allGather(buf, 17)).rejects.toThrow(/^allGather of 1 x 17 bytes needs bytes \[0, 17\) of a 16-byte buffer$/);
    await expect(nccl.allGather(buf, Number.NaN)).rejects.toThrow(/allGather's byte count \(per rank\) must be an integer between 0 and/);
    nccl.close();
    await expect(nccl.reduceScatter(buf, 4, "f32", "sum")).rejects.toThrow(/reduceScatter on a closed NCCL communicator/);
    await expect(nccl.allGather(buf, 16)).rejects.toThrow(/allGather on a closed NCCL communicator/);
    expect(fake.log()).toEqual(["init rank=0 nranks=1", "destroy"]);
    backend.free(buf);
  });

  it("checks its arguments before NCCL sees them", async () => {
    useFake();
    const nccl = await open();
    const buf = backend.alloc(16);
    await expect(nccl.allReduce(buf, 5, "f32", "sum")).rejects.toThrow(/allReduce needs bytes \[0, 20\) of a 16-byte buffer/);
    await expect(nccl.allReduce(buf, 4, "i32" as FloatDType, "sum")).rejects.toThrow(KernelArgumentError);
    await expect(nccl.allReduce(buf, 4, "f32", "max" as "sum")).rejects.toThrow(/"sum" or "mean", not max/);
    await expect(nccl.broadcast(buf, 16, 1)).rejects.toThrow(/broadcast's root must be an integer between 0 and 0, got 1/);
    nccl.close();
    await expect(nccl.allReduce(buf, 4, "f32", "sum")).rejects.toThrow(/allReduce on a closed NCCL communicator/);
    backend.free(buf);
    const id = ncclUniqueId();
    await expect(openNcclCollectives(backend, { uniqueId: id, rank: 1, worldSize: 1 })).rejects.toThrow(/rank must be an integer between 0 and 0, got 1/);
    await expect(openNcclCollectives(backend, { uniqueId: id.subarray(0, 64), rank: 0, worldSize: 1 })).rejects.toThrow(/128 bytes/);
    const reference = createReferenceBackend();
    await expect(openNcclCollectives(reference, { uniqueId: id, rank: 0, worldSize: 1 })).rejects.toThrow(/need a backend made by @kiln\/kernels-cuda, not reference/);
    reference.dispose();
  });

  it("rejects when NCCL refuses to enqueue, saying which collective and NCCL's reason", async () => {
    useFake({ failEnqueue: true });
    const nccl = await open();
    const buf = backend.alloc(16);
    const err = await nccl.allReduce(buf, 4, "f32", "sum").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeviceError);
    expect((err as DeviceError).message).toBe("allReduce of 4 f32 (sum) failed on rank 0: unhandled system error (fake) (ncclSystemError, 2)");
    expect((err as DeviceError).hint).toMatch(/NCCL_DEBUG=WARN/);
    await expect(nccl.reduceScatter(buf, 2, "bf16", "mean")).rejects.toThrow("reduceScatter of 1 x 2 bf16 (mean) failed on rank 0: unhandled system error (fake) (ncclSystemError, 2)");
    await expect(nccl.allGather(buf, 16)).rejects.toThrow("allGather of 1 x 16 bytes failed on rank 0: unhandled system error (fake) (ncclSystemError, 2)");
    nccl.close();
    backend.free(buf);
  });

  it("aborts the communicator and rejects when a collective does not complete within the timeout", async () => {
    const fake = useFake({ async: "hang" });
    const nccl = await open(300);
    const buf = backend.alloc(64);
    const started = Date.now();
    const err = await nccl.allReduce(buf, 16, "bf16", "mean").catch((e: unknown) => e);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(err).toBeInstanceOf(DeviceError);
    expect((err as DeviceError).message).toBe(
      "allReduce of 16 bf16 (mean) on rank 0 of 1 did not complete within 300 ms; the communicator was aborted (a rank may have stopped, crashed, or called a different collective)",
    );
    expect((err as DeviceError).hint).toMatch(/every rank is alive and issues the same collectives in the same order; raise timeoutMs/);
    expect(fake.log().at(-1)).toBe("abort");
    // Every later call says why the communicator is gone.
    await expect(nccl.broadcast(buf, 8, 0)).rejects.toThrow(/the NCCL communicator of rank 0 is aborted: allReduce of 16 bf16 \(mean\) on rank 0 of 1 did not complete within 300 ms/);
    nccl.close();
    expect(fake.log().filter((l) => l === "abort" || l === "destroy")).toEqual(["abort"]);
    backend.free(buf);
  });

  it("aborts and rejects when NCCL reports an asynchronous error", async () => {
    const fake = useFake({ async: "remote" });
    const nccl = await open();
    const buf = backend.alloc(64);
    await expect(nccl.broadcast(buf, 64, 0)).rejects.toThrow(
      "broadcast of 64 bytes from rank 0 on rank 0 of 1 failed: NCCL reported remote process exited or there was a network error (fake) (ncclRemoteError, 6); the communicator was aborted",
    );
    expect(fake.log().at(-1)).toBe("abort");
    nccl.close();
    backend.free(buf);
  });

  it("rejects when the other ranks do not join within the timeout", async () => {
    const fake = useFake({ waitSeconds: 1 });
    const started = Date.now();
    const joining = openNcclCollectives(backend, { uniqueId: ncclUniqueId(), rank: 0, worldSize: 2, timeoutMs: 200 });
    await expect(joining).rejects.toThrow("NCCL rank 0 of 2: joining the communicator did not complete within 200 ms");
    expect(Date.now() - started).toBeLessThan(900); // before the fake itself gives up
    await expect(joining.catch((e: DeviceError) => e.hint)).resolves.toMatch(/same unique id and world size/);
    // The join (blocked in the fake) gives up after 1 s, after the promise has rejected; nothing is logged.
    await new Promise((r) => setTimeout(r, 1500));
    expect(fake.log()).toEqual([]);
  });

  it("keeps Node's event loop free while a collective is pending", async () => {
    useFake({ async: "hang" });
    const nccl = await open(400);
    const buf = backend.alloc(64);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    await nccl.allReduce(buf, 16, "f32", "sum").catch(() => undefined);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(10);
    nccl.close();
    backend.free(buf);
  });
});
