import { execFileSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "@kiln/contract";
import { createCudaSimBackend } from "../src/index.js";
import { nativeBackendParts } from "../src/cuda-backend.js";
import { H100_SHARED_PER_BLOCK, simulatorSkipReason } from "./support/simulator.js";
import { PACKAGE_ROOT } from "./support/sim-toolchain.js";

// The backend's memory and copy paths (shared by the GPU and the simulator): the
// caching allocator, staged uploads, async downloads, out-of-memory reporting.
const skip = simulatorSkipReason();

describe.skipIf(skip)(`cuda-sim backend${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let backend: Backend;
  beforeAll(() => {
    backend = createCudaSimBackend();
  });
  afterAll(() => backend?.dispose());

  it("uploads, copies and downloads bytes, and the upload source may be reused at once", async () => {
    const a = backend.alloc(4096);
    const b = backend.alloc(4096);
    const src = new Uint8Array(4096).map((_, i) => i * 7);
    backend.upload(a, src);
    src.fill(0);
    backend.copy({ buffer: a, byteOffset: 100 }, { buffer: b, byteOffset: 8 }, 1000);
    const out = new Uint8Array(1000);
    await backend.download({ buffer: b, byteOffset: 8 }, out);
    expect(Array.from(out.subarray(0, 4))).toEqual([(100 * 7) & 255, (101 * 7) & 255, (102 * 7) & 255, (103 * 7) & 255]);
    backend.free(a);
    backend.free(b);
  });

  it("reuses freed blocks: a steady state makes no new device allocation", () => {
    const sizes = [1000, 70_000, 3_000_000];
    const round = () => sizes.map((s) => backend.alloc(s)).forEach((h) => backend.free(h));
    round();
    const calls = backend.memoryStats().allocCalls;
    round();
    round();
    expect(backend.memoryStats().allocCalls).toBe(calls + 2 * sizes.length);
    expect(backend.memoryStats().inUseBytes).toBe(0);
  });

  // Each kernel setting the addon reads: a value it does not take, the message naming it, the hint with the values it takes.
  const refusals = [
    ["KILN_MATMUL_TILES", "128", /KILN_MATMUL_TILES=128 is not a block tile of the pipelined matmuls/, "use large or small, or unset it"],
    ["KILN_ATTENTION_PATH", "flash", /KILN_ATTENTION_PATH=flash is not an attention path/, "use mma, wgmma (sm_90), wmma or simt, or unset it"],
    ["KILN_ATTENTION_WGMMA_ROWS", "96", /KILN_ATTENTION_WGMMA_ROWS=96 is not a block size of the wgmma attention/, "use 64 or 128, or unset it"],
    ["KILN_ATTENTION_DQ", "atomic", /KILN_ATTENTION_DQ=atomic is not a way of the attention backward's dQ/, "use recompute or stored-ds, or unset it"],
    ["KILN_ATTENTION_MMA_KEYS", "128", /KILN_ATTENTION_MMA_KEYS=128 is not a key tile of the mma.sync attention forward/, "use 32 or 64, or unset it"],
  ] as const;
  for (const [variable, value, message, hint] of refusals) {
    it(`refuses ${variable}=${value}, naming it and the values it takes`, () => {
      process.env[variable] = value;
      try {
        expect(() => createCudaSimBackend()).toThrow(message);
        expect(() => createCudaSimBackend()).toThrow(expect.objectContaining({ hint }));
      } finally {
        delete process.env[variable];
      }
    });
  }

  it("times its work with device marks: each mark's time after the first, in order, a new list after each read", async () => {
    const timer = backend.timer!;
    const [m, n, k] = [192, 160, 128];
    const [a, b, c] = [m * k, k * n, m * n].map((e) => backend.alloc(4 * e));
    const marksAround = async (calls: number) => {
      const host: number[] = [];
      for (let i = 0; i < calls; i++) {
        const t0 = performance.now();
        timer.mark();
        backend.kernels.matmul({ a, b, c, m, n, k, dtype: "f32" });
        timer.mark();
        host.push(performance.now() - t0);
      }
      return { host, device: await timer.read() };
    };
    const { host, device } = await marksAround(3);
    expect(device).toHaveLength(6);
    expect(device[0]).toBe(0);
    for (let i = 1; i < 6; i++) expect(device[i]).toBeGreaterThanOrEqual(device[i - 1]);
    // The simulator runs a kernel as it is issued: the time between its two marks is its run,
    // inside the host's time around the call (a matmul this size takes milliseconds on the host).
    const between = [0, 1, 2].map((i) => device[2 * i + 1] - device[2 * i]);
    between.forEach((t, i) => expect(t).toBeLessThanOrEqual(host[i] + 0.05));
    expect(Math.max(...between.map((t, i) => t / host[i]))).toBeGreaterThan(0.5);
    expect(await timer.read()).toHaveLength(0);
    expect((await marksAround(1)).device).toHaveLength(2);
    [a, b, c].forEach((x) => backend.free(x));
  });

  it("records kernel calls into a graph that runs only when launched, as often as launched", async () => {
    const graphs = backend.graphs!;
    const n = 1000;
    const [x, y] = [backend.alloc(4 * n), backend.alloc(4 * n)];
    backend.upload(x, new Float32Array(n).fill(1));
    backend.upload(y, new Float32Array(n).fill(0));
    const read = async (b: typeof x) => {
      const out = new Float32Array(n);
      await backend.download(b, out);
      return out;
    };
    graphs.begin();
    backend.kernels.add({ a: x, b: y, out: y, n, dtype: "f32" }); // y += x
    backend.kernels.scale({ x: y, out: y, n, alpha: 2, dtype: "f32" }); // y *= 2
    // Only kernels: a copy, a download or a wait while recording is refused.
    expect(() => backend.copy(x, y, 4)).toThrow(/a copy while a CUDA graph is being recorded/);
    const graph = graphs.end();
    expect((await read(y))[0]).toBe(0); // recorded, not run
    expect(graphs.launch(graph)).toBe(true);
    expect((await read(y))[7]).toBe(2);
    expect(graphs.launch(graph)).toBe(true);
    expect(graphs.launch(graph)).toBe(true);
    expect(Array.from(new Set(await read(y)))).toEqual([14]); // ((2 + 1) * 2 + 1) * 2
    graphs.release(graph);
    expect(() => graphs.launch(graph)).toThrow(/no CUDA graph/);
    [x, y].forEach((b) => backend.free(b));
  });

  it("a graph recorded before its kernels' scratch memory moved is stale: launch runs nothing and says so", () => {
    // A device of its own, so that its scratch block starts empty.
    const own = createCudaSimBackend();
    try {
      // embeddingBackward sorts the ids in the device's scratch block: 8 bytes a vocabulary entry and more.
      const embeddingBackward = (vocab: number) => {
        const [ids, dOut, dTable] = [own.alloc(4 * 16), own.alloc(4 * 16 * 8), own.alloc(4 * vocab * 8)];
        own.upload(ids, Int32Array.from({ length: 16 }, (_, i) => i % 7));
        return () => own.kernels.embeddingBackward({ ids, dOut, dTable, count: 16, vocab, dim: 8, dtype: "f32" });
      };
      const small = embeddingBackward(64);
      small();
      own.graphs!.begin();
      small();
      const before = own.graphs!.end();
      expect(own.graphs!.launch(before)).toBe(true);
      embeddingBackward(1 << 20)(); // needs about 8 MiB of scratch: the block moves
      expect(own.graphs!.launch(before)).toBe(false);
      own.graphs!.begin();
      small();
      const after = own.graphs!.end();
      expect(own.graphs!.launch(after)).toBe(true);
      [before, after].forEach((g) => own.graphs!.release(g));
    } finally {
      own.dispose();
    }
  });

  it("prepares a call once (checks and bounds checks up front) that then runs as the plain call does, each time it is issued", async () => {
    const n = 300;
    const [x, y, out] = [backend.alloc(4 * n), backend.alloc(4 * n), backend.alloc(4 * n)];
    backend.upload(x, Float32Array.from({ length: n }, (_, i) => i));
    backend.upload(y, new Float32Array(n).fill(0.5));
    const add = backend.prepare!("add", { a: x, b: out, out, n, dtype: "f32" }); // out += x
    backend.upload(out, new Float32Array(n).fill(0));
    add();
    add();
    const got = new Float32Array(n);
    await backend.download(out, got);
    expect(got[7]).toBe(14);
    expect(got[n - 1]).toBe(2 * (n - 1));
    // Refused when prepared, as the plain call would be: an operand past its buffer, a bad size.
    expect(() => backend.prepare!("add", { a: x, b: y, out, n: n + 1, dtype: "f32" })).toThrow(/needs bytes \[0, 1204\) of a 1200-byte buffer/);
    expect(() => backend.prepare!("add", { a: x, b: y, out, n: 0, dtype: "f32" })).toThrow(/n/);
    [x, y, out].forEach((b) => backend.free(b));
  });

  it("bounds-checks every operand before a kernel runs", () => {
    const a = backend.alloc(16);
    expect(() => backend.kernels.fill({ out: a, n: 5, value: 1, dtype: "f32" })).toThrow(/needs bytes \[0, 20\) of a 16-byte buffer/);
    backend.free(a);
  });

  it("offers an A100's shared memory a block, or KILN_SIM_SHARED_PER_BLOCK's when the device opens", () => {
    const perBlock = () => {
      const b = createCudaSimBackend();
      try {
        return nativeBackendParts(b)!.device.properties().sharedMemoryPerBlock;
      } finally {
        b.dispose();
      }
    };
    expect(perBlock()).toBe(163 * 1024);
    process.env.KILN_SIM_SHARED_PER_BLOCK = String(H100_SHARED_PER_BLOCK);
    try {
      expect(perBlock()).toBe(H100_SHARED_PER_BLOCK);
    } finally {
      delete process.env.KILN_SIM_SHARED_PER_BLOCK;
    }
  });

  it("reports running out of device memory with the sizes and what to do, after releasing its cache", () => {
    // A 64 MiB device: cache 40 MiB, free it, then ask for 48 MiB (fits only once the cache is released), then too much.
    const script = `
      import { createCudaSimBackend } from ${JSON.stringify(path.join(PACKAGE_ROOT, "dist", "index.js"))};
      const b = createCudaSimBackend();
      b.free(b.alloc(40 * 2 ** 20));
      const big = b.alloc(48 * 2 ** 20);
      try { b.alloc(32 * 2 ** 20); } catch (e) { console.log(e.constructor.name + ": " + e.message + " | " + e.hint); }
      b.free(big);
      b.dispose();`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, KILN_SIM_MEMORY_BYTES: String(64 * 2 ** 20) } });
    expect(out).toMatch(/MemoryError: cannot allocate 32\.0 MiB on the GPU: out of device memory: requested 32\.0 MiB, 16\.0 MiB free on the device, 48\.0 MiB reserved by kiln \(48\.0 MiB in use\)/);
    expect(out).toMatch(/smaller batch_size or seq_len, --recompute blocks, or --dtype bf16/);
  });
});
