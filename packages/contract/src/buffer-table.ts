import type { BufferHandle, MemoryStats, Operand } from "./backend.js";
import { resolveOperand } from "./backend.js";
import { KernelArgumentError } from "./errors.js";

/** Where a backend's bytes live: it hands out addresses and takes them back. */
export interface AddressSpace {
  /** An address of `byteLength` bytes; throws (a MemoryError) when there is no room. */
  allocate(byteLength: number): number;
  release(address: number): void;
}

/**
 * Contract buffer handles over a backend's address space (handle id -> address),
 * with the contract's accounting: bytes in live buffers, their peak, alloc calls,
 * and bounds-checked addresses for kernel operands. Every backend keeps one.
 */
export class BufferTable {
  private readonly blocks = new Map<number, { address: number; byteLength: number }>();
  private nextId = 1;
  private inUse = 0;
  private peak = 0;
  private allocCalls = 0;

  constructor(private readonly space: AddressSpace) {}

  alloc(byteLength: number): BufferHandle {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new KernelArgumentError(`cannot allocate ${byteLength} bytes`, { where: "alloc", hint: "pass a non-negative integer byte count" });
    }
    const address = this.space.allocate(byteLength);
    const id = this.nextId++;
    this.blocks.set(id, { address, byteLength });
    this.inUse += byteLength;
    this.peak = Math.max(this.peak, this.inUse);
    this.allocCalls++;
    return Object.freeze({ id, byteLength });
  }

  free(buffer: BufferHandle): void {
    const block = this.blocks.get(buffer.id);
    if (!block) throw new KernelArgumentError(`buffer ${buffer.id} is not live`, { where: "free", hint: "a buffer is freed once" });
    this.blocks.delete(buffer.id);
    this.space.release(block.address);
    this.inUse -= block.byteLength;
  }

  /** Address of `byteLength` bytes at `op`, bounds-checked against its buffer. */
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
    return block.address + byteOffset;
  }

  stats(totalBytes: number): MemoryStats {
    return { inUseBytes: this.inUse, peakBytes: this.peak, totalBytes, liveAllocations: this.blocks.size, allocCalls: this.allocCalls };
  }

  resetPeak(): void {
    this.peak = this.inUse;
  }

  /** Releases every live buffer. */
  clear(): void {
    for (const block of this.blocks.values()) this.space.release(block.address);
    this.blocks.clear();
    this.inUse = 0;
  }
}
