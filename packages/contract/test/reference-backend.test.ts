import { describe, expect, it } from "vitest";
import { KernelArgumentError, MemoryError, createReferenceBackend, sliceOperand } from "@kiln/contract";

describe("reference backend memory", () => {
  it("tracks bytes in use, the peak and alloc calls", () => {
    const b = createReferenceBackend();
    const x = b.alloc(100);
    const y = b.alloc(50);
    b.free(x);
    expect(b.memoryStats()).toMatchObject({ inUseBytes: 50, peakBytes: 150, liveAllocations: 1, allocCalls: 2 });
    b.resetPeakMemory();
    expect(b.memoryStats().peakBytes).toBe(50);
    b.free(y);
  });

  it("refuses an allocation past its memory with a MemoryError", () => {
    const b = createReferenceBackend({ memoryBytes: 1000 });
    b.alloc(600);
    expect(() => b.alloc(600)).toThrow(MemoryError);
  });

  it("uploads, copies and downloads through slices", async () => {
    const b = createReferenceBackend();
    const x = b.alloc(16);
    const y = b.alloc(16);
    b.upload(sliceOperand(x, 4), new Float32Array([1, 2, 3]));
    b.copy(sliceOperand(x, 4), y, 12);
    const out = new Float32Array(4);
    await b.download(y, out);
    expect(Array.from(out)).toEqual([1, 2, 3, 0]);
  });

  it("rejects a kernel whose operand runs past its buffer", () => {
    const b = createReferenceBackend();
    const x = b.alloc(8);
    expect(() => b.kernels.fill({ out: x, n: 3, value: 1, dtype: "f32" })).toThrow(/needs bytes \[0, 12\) of a 8-byte buffer/);
  });

  it("rejects an output that overlaps an input where the kernel does not allow it", () => {
    const b = createReferenceBackend();
    const buf = b.alloc(64);
    const call = () => b.kernels.matmul({ a: buf, b: buf, c: sliceOperand(buf, 4), m: 2, n: 2, k: 2, dtype: "f32" });
    expect(call).toThrow(KernelArgumentError);
    expect(call).toThrow(/c overlaps a/);
  });

  it("rejects inconsistent dims with the kernel's name", () => {
    const b = createReferenceBackend();
    const buf = b.alloc(1024);
    expect(() =>
      b.kernels.attentionForward({ q: buf, k: buf, v: buf, out: buf, lse: buf, batch: 1, seqLen: 2, heads: 3, kvHeads: 2, headDim: 4, dtype: "f32" }),
    ).toThrow(/heads \(3\) must be a multiple of kvHeads \(2\)/);
  });
});
