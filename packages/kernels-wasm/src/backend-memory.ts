import { type BufferHandle, KernelArgumentError, type MemoryStats, type Operand, resolveOperand } from "@kiln/contract";
import type { SharedHeap } from "./shared-heap.js";

/** Contract buffer handles over heap blocks: handle id -> byte offset in linear memory. */
export class BackendMemory {
  private readonly blocks = new Map<number, { ptr: number; byteLength: number }>();
  private nextId = 1;
  private inUse = 0;
  private peak = 0;
  private allocCalls = 0;

  constructor(private readonly heap: SharedHeap) {}

  alloc(byteLength: number): BufferHandle {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new KernelArgumentError(`cannot allocate ${byteLength} bytes`, { where: "alloc", hint: "pass a non-negative integer byte count" });
    }
    const ptr = this.heap.alloc(byteLength);
    const id = this.nextId++;
    this.blocks.set(id, { ptr, byteLength });
    this.inUse += byteLength;
    this.peak = Math.max(this.peak, this.inUse);
    this.allocCalls++;
    return Object.freeze({ id, byteLength });
  }

  free(buffer: BufferHandle): void {
    const block = this.blocks.get(buffer.id);
    if (!block) throw new KernelArgumentError(`buffer ${buffer.id} is not live`, { where: "free", hint: "a buffer is freed once" });
    this.blocks.delete(buffer.id);
    this.heap.release(block.ptr);
    this.inUse -= block.byteLength;
  }

  /** Byte offset in linear memory of `byteLength` bytes at `op`, bounds-checked against its buffer. */
  address(op: Operand, byteLength: number, what: string): number {
    const { buffer, byteOffset } = resolveOperand(op);
    const block = this.blocks.get(buffer.id);
    if (!block) throw new KernelArgumentError(`${what} names buffer ${buffer.id}, which is not live`, { where: what });
    if (!Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset + byteLength > block.byteLength) {
      throw new KernelArgumentError(`${what} needs bytes [${byteOffset}, ${byteOffset + byteLength}) of a ${block.byteLength}-byte buffer`, {
        where: what,
        hint: "allocate a larger buffer or fix the dims",
      });
    }
    return block.ptr + byteOffset;
  }

  stats(totalBytes: number): MemoryStats {
    return { inUseBytes: this.inUse, peakBytes: this.peak, totalBytes, liveAllocations: this.blocks.size, allocCalls: this.allocCalls };
  }

  resetPeak(): void {
    this.peak = this.inUse;
  }

  clear(): void {
    for (const block of this.blocks.values()) this.heap.release(block.ptr);
    this.blocks.clear();
    this.inUse = 0;
  }
}
