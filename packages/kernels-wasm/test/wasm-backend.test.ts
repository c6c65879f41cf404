import { KernelArgumentError, sliceOperand } from "@kiln/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "../src/index.js";
import type { Backend } from "@kiln/contract";

describe("wasm backend", () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await createWasmBackend({ threads: 2 });
  });
  afterAll(() => backend.dispose());

  it("describes its device and measured f32 peak", () => {
    const caps = backend.capabilities();
    expect(caps.device.kind).toBe("cpu");
    expect(caps.device.parallelism).toBe(2);
    expect(["relaxed-simd", "simd128"]).toContain(caps.device.simd);
    expect(caps.device.memoryBytes).toBeLessThanOrEqual(2 ** 32);
    expect(caps.kernelDTypes.matmul).toEqual(["f32", "bf16", "f16"]);
    expect(caps.kernelDTypes.adamW).toEqual(["f32", "bf16", "f16"]);
    expect(caps.peakFlops.f32).toBeGreaterThan(1e9);
  });

  it("round-trips bytes through upload, copy and download, slices included", async () => {
    const a = backend.alloc(64);
    const b = backend.alloc(64);
    backend.upload(a, new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]));
    backend.copy(sliceOperand(a, 8), sliceOperand(b, 4), 16);
    const out = new Float32Array(4);
    await backend.download(sliceOperand(b, 4), out);
    expect(Array.from(out)).toEqual([3, 4, 5, 6]);
    backend.free(a);
    backend.free(b);
  });

  it("counts memory like the contract says", () => {
    backend.resetPeakMemory();
    const before = backend.memoryStats();
    const x = backend.alloc(1000);
    const y = backend.alloc(24);
    const during = backend.memoryStats();
    expect(during.inUseBytes - before.inUseBytes).toBe(1024);
    expect(during.liveAllocations - before.liveAllocations).toBe(2);
    expect(during.allocCalls - before.allocCalls).toBe(2);
    backend.free(x);
    backend.free(y);
    const after = backend.memoryStats();
    expect(after.inUseBytes).toBe(before.inUseBytes);
    expect(after.peakBytes).toBe(before.inUseBytes + 1024);
  });

  it("refuses out-of-bounds operands and overlapping outputs", () => {
    const a = backend.alloc(4 * 6);
    const c = backend.alloc(4 * 4);
    expect(() => backend.kernels.matmul({ a, b: a, c, m: 2, n: 2, k: 4, dtype: "f32" })).toThrow(KernelArgumentError);
    expect(() => backend.kernels.matmul({ a, b: a, c: a, m: 1, n: 1, k: 1, dtype: "f32" })).toThrow(/overlaps/);
    expect(() => backend.kernels.fill({ out: c, value: 0, n: 5, dtype: "f32" })).toThrow(KernelArgumentError);
    expect(() => backend.kernels.add({ a, b: a, out: sliceOperand(a, 4), n: 4, dtype: "f32" })).toThrow(/overlaps/);
    backend.free(a);
    backend.free(c);
  });
});

describe("wasm backend peak from the caller", () => {
  it("asks the peakFlops option, with this runtime's SIMD variant and threads and a ceiling to measure with", async () => {
    const seen: { simd: string; threads: number; gflops: number }[] = [];
    const backend = await createWasmBackend({
      threads: 2,
      peakFlops: (info, ceiling) => {
        const r = ceiling(1000);
        seen.push({ simd: info.simd, threads: info.threads, gflops: r.gflops });
        return 12.5e9;
      },
    });
    try {
      expect(backend.capabilities().peakFlops).toEqual({ f32: 12.5e9 });
      expect(seen).toHaveLength(1);
      expect(seen[0].threads).toBe(2);
      expect(["relaxed", "plain"]).toContain(seen[0].simd);
      expect(seen[0].gflops).toBeGreaterThan(0);
    } finally {
      backend.dispose();
    }
  });

  it("has no peak when neither measured nor given", async () => {
    const backend = await createWasmBackend({ threads: 1, measurePeak: false });
    try {
      expect(backend.capabilities().peakFlops).toEqual({});
    } finally {
      backend.dispose();
    }
  });
});
