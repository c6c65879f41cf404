import { MemoryError } from "@kiln/contract";
import { describe, expect, it } from "vitest";
import { SharedHeap, WASM32_MAX_BYTES } from "../src/index.js";

const PAGE = 65536;
const memory = (pages = 1) => new WebAssembly.Memory({ initial: pages, maximum: 1024 });

describe("SharedHeap", () => {
  it("hands out 64-byte aligned, disjoint blocks above its base", () => {
    const heap = new SharedHeap(memory(), 100);
    const a = heap.alloc(1);
    const b = heap.alloc(100);
    const c = heap.alloc(64);
    expect(a).toBe(128);
    for (const p of [a, b, c]) expect(p % 64).toBe(0);
    expect(b).toBeGreaterThanOrEqual(a + 64);
    expect(c).toBeGreaterThanOrEqual(b + 128);
    expect(heap.stats().inUseBytes).toBe(64 + 128 + 64);
  });

  it("coalesces freed neighbours so a large block fits again", () => {
    const heap = new SharedHeap(memory(), 0);
    const blocks = Array.from({ length: 8 }, () => heap.alloc(1024));
    for (const p of [blocks[1], blocks[3], blocks[2]]) heap.release(p);
    expect(heap.alloc(3 * 1024)).toBe(blocks[1]);
    for (const p of [blocks[0], blocks[4], blocks[5], blocks[6], blocks[7]]) heap.release(p);
    heap.release(blocks[1]);
    expect(heap.stats().freeBlocks).toBe(1);
    expect(heap.stats().inUseBytes).toBe(0);
  });

  it("picks the smallest block that fits", () => {
    const heap = new SharedHeap(memory(), 0);
    const big = heap.alloc(4096);
    heap.alloc(64);
    const small = heap.alloc(256);
    heap.alloc(64);
    heap.release(big);
    heap.release(small);
    expect(heap.alloc(200)).toBe(small);
  });

  it("grows the memory when nothing fits and tracks the peak", () => {
    const mem = memory(1);
    const heap = new SharedHeap(mem, 0);
    const p = heap.alloc(3 * PAGE);
    expect(mem.buffer.byteLength).toBeGreaterThanOrEqual(3 * PAGE);
    new Float32Array(mem.buffer, p, (3 * PAGE) / 4).fill(1);
    heap.release(p);
    const s = heap.stats();
    expect(s.peakBytes).toBe(3 * PAGE);
    expect(s.inUseBytes).toBe(0);
    expect(s.committedBytes).toBe(mem.buffer.byteLength);
    heap.resetPeak();
    expect(heap.stats().peakBytes).toBe(0);
  });

  it("throws a MemoryError before passing its limit, and stays usable", () => {
    const heap = new SharedHeap(memory(1), 0, 16 * PAGE);
    const p = heap.alloc(8 * PAGE);
    expect(() => heap.alloc(9 * PAGE)).toThrow(MemoryError);
    expect(() => heap.alloc(9 * PAGE)).toThrow(/above its limit of 1048576 bytes/);
    heap.release(p);
    expect(heap.alloc(15 * PAGE)).toBeGreaterThanOrEqual(0);
  });

  it("refuses a request past the wasm32 4 GiB address space without touching memory", () => {
    const mem = memory(1);
    const heap = new SharedHeap(mem, 1024);
    expect(heap.stats().totalBytes).toBe(WASM32_MAX_BYTES);
    let error: unknown;
    try {
      heap.alloc(WASM32_MAX_BYTES - 512);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MemoryError);
    expect((error as MemoryError).message).toMatch(/above its limit of 4294967296 bytes/);
    expect((error as MemoryError).hint).toMatch(/wasm32 addresses at most 4 GiB/);
    expect(mem.buffer.byteLength).toBe(PAGE);
  });

  it("rejects freeing what it did not allocate", () => {
    const heap = new SharedHeap(memory(), 0);
    expect(() => heap.release(12345)).toThrow(/not a live allocation/);
  });
});
