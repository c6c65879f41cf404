import { type BufferHandle, KernelArgumentError, MemoryError, type MemoryStats, type Operand, resolveOperand } from "@kiln/contract";
import type { NativeDevice } from "./native-addon.js";

const MiB = 2 ** 20;
const mib = (b: number) => `${(b / MiB).toFixed(1)} MiB`;

/**
 * Contract buffer handles over device allocations (handle id -> device address),
 * with the contract's accounting: bytes in live buffers, their peak, alloc calls.
 * The caching allocator underneath (csrc/runtime/caching_allocator.cc) reuses
 * freed blocks, so steady-state steps make no device allocation.
 */
export class DeviceMemory {
  private readonly blocks = new Map<number, { address: number; byteLength: number }>();
  private nextId = 1;
  private inUse = 0;
  private peak = 0;
  private allocCalls = 0;

  constructor(
    private readonly device: NativeDevice,
    private readonly totalBytes: number,
  ) {}

  alloc(byteLength: number): BufferHandle {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new KernelArgumentError(`cannot allocate ${byteLength} bytes`, { where: "alloc", hint: "pass a non-negative integer byte count" });
    }
    let address: number;
    try {
      address = this.device.alloc(byteLength);
    } catch (err) {
      if ((err as { code?: string }).code === "KILN_OUT_OF_MEMORY") {
        throw new MemoryError(`cannot allocate ${mib(byteLength)} on the GPU: ${(err as Error).message}`, {
          where: "GPU memory",
          hint: "use a smaller batch_size or seq_len, --recompute blocks, or --dtype bf16",
        });
      }
      throw err;
    }
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
    this.device.free(block.address);
    this.inUse -= block.byteLength;
  }

  /** Device address of `byteLength` bytes at `op`, bounds-checked against its buffer. */
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

  stats(): MemoryStats {
    return { inUseBytes: this.inUse, peakBytes: this.peak, totalBytes: this.totalBytes, liveAllocations: this.blocks.size, allocCalls: this.allocCalls };
  }

  resetPeak(): void {
    this.peak = this.inUse;
  }

  clear(): void {
    for (const block of this.blocks.values()) this.device.free(block.address);
    this.blocks.clear();
    this.inUse = 0;
  }
}
