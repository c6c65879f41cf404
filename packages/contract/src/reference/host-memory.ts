import { type BufferHandle, type MemoryStats, type Operand, resolveOperand } from "../backend.js";
import { KernelArgumentError, MemoryError } from "../errors.js";

/** Buffers as plain host byte arrays, with the contract's memory statistics. */
export class HostMemory {
  private readonly buffers = new Map<number, Uint8Array>();
  private nextId = 1;
  private inUse = 0;
  private peak = 0;
  private allocCalls = 0;

  constructor(readonly totalBytes: number) {}

  alloc(byteLength: number): BufferHandle {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new KernelArgumentError(`cannot allocate ${byteLength} bytes`, { where: "alloc", hint: "pass a non-negative integer byte count" });
    }
    if (this.inUse + byteLength > this.totalBytes) {
      throw new MemoryError(
        `allocating ${byteLength} bytes would use ${this.inUse + byteLength} of ${this.totalBytes} bytes`,
        { where: "alloc", hint: "free buffers first or lower the batch size" },
      );
    }
    const id = this.nextId++;
    this.buffers.set(id, new Uint8Array(byteLength));
    this.inUse += byteLength;
    this.peak = Math.max(this.peak, this.inUse);
    this.allocCalls++;
    return Object.freeze({ id, byteLength });
  }

  free(buffer: BufferHandle): void {
    const bytes = this.buffers.get(buffer.id);
    if (!bytes) throw new KernelArgumentError(`buffer ${buffer.id} is not live`, { where: "free", hint: "a buffer is freed once" });
    this.buffers.delete(buffer.id);
    this.inUse -= bytes.byteLength;
  }

  /** The bytes an operand names, `byteLength` long, bounds-checked. */
  view(op: Operand, byteLength: number, what: string): Uint8Array {
    const { buffer, byteOffset } = resolveOperand(op);
    const bytes = this.buffers.get(buffer.id);
    if (!bytes) throw new KernelArgumentError(`${what} names buffer ${buffer.id}, which is not live`, { where: what });
    if (byteOffset < 0 || byteOffset + byteLength > bytes.byteLength) {
      throw new KernelArgumentError(
        `${what} needs bytes [${byteOffset}, ${byteOffset + byteLength}) of a ${bytes.byteLength}-byte buffer`,
        { where: what, hint: "allocate a larger buffer or fix the dims" },
      );
    }
    return bytes.subarray(byteOffset, byteOffset + byteLength);
  }

  stats(): MemoryStats {
    return { inUseBytes: this.inUse, peakBytes: this.peak, totalBytes: this.totalBytes, liveAllocations: this.buffers.size, allocCalls: this.allocCalls };
  }

  resetPeak(): void {
    this.peak = this.inUse;
  }

  clear(): void {
    this.buffers.clear();
    this.inUse = 0;
  }
}
