import { type BufferHandle, type MemoryStats, type Operand, resolveOperand } from "../backend.js";
import { type AddressSpace, BufferTable } from "../buffer-table.js";
import { MemoryError } from "../errors.js";

/**
 * Host byte arrays as an address space: each buffer gets a base address of its own
 * (never reused), so an operand's address minus its byte offset names its array.
 */
class HostArrays implements AddressSpace {
  readonly arrays = new Map<number, Uint8Array>();
  private nextBase = 0;
  private used = 0;

  constructor(private readonly totalBytes: number) {}

  allocate(byteLength: number): number {
    if (this.used + byteLength > this.totalBytes) {
      throw new MemoryError(`allocating ${byteLength} bytes would use ${this.used + byteLength} of ${this.totalBytes} bytes`, {
        where: "alloc",
        hint: "free buffers first or lower the batch size",
      });
    }
    const base = this.nextBase;
    this.nextBase += Math.max(byteLength, 1);
    this.arrays.set(base, new Uint8Array(byteLength));
    this.used += byteLength;
    return base;
  }

  release(address: number): void {
    this.used -= this.arrays.get(address)?.byteLength ?? 0;
    this.arrays.delete(address);
  }
}

/** Buffers as plain host byte arrays, with the contract's buffer table and memory statistics. */
export class HostMemory {
  private readonly space: HostArrays;
  private readonly table: BufferTable;

  constructor(readonly totalBytes: number) {
    this.space = new HostArrays(totalBytes);
    this.table = new BufferTable(this.space);
  }

  alloc(byteLength: number): BufferHandle {
    return this.table.alloc(byteLength);
  }

  free(buffer: BufferHandle): void {
    this.table.free(buffer);
  }

  /** The bytes an operand names, `byteLength` long, bounds-checked. */
  view(op: Operand, byteLength: number, what: string): Uint8Array {
    const address = this.table.address(op, byteLength, what);
    const { byteOffset } = resolveOperand(op);
    return this.space.arrays.get(address - byteOffset)!.subarray(byteOffset, byteOffset + byteLength);
  }

  stats(): MemoryStats {
    return this.table.stats(this.totalBytes);
  }

  resetPeak(): void {
    this.table.resetPeak();
  }

  clear(): void {
    this.table.clear();
  }
}
