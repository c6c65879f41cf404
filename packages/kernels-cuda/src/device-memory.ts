import { BufferTable, MemoryError, type MemoryStats } from "@kiln/contract";
import type { NativeDevice } from "./native-addon.js";

const MiB = 2 ** 20;
const mib = (b: number) => `${(b / MiB).toFixed(1)} MiB`;

/**
 * Contract buffer handles over device allocations (handle id -> device address).
 * The caching allocator underneath (csrc/runtime/caching_allocator.cc) reuses
 * freed blocks, so steady-state steps make no device allocation. Running out of
 * device memory is a MemoryError with the sizes and what to do.
 */
export class DeviceMemory extends BufferTable {
  constructor(private readonly device: NativeDevice) {
    super({
      allocate: (byteLength) => onDevice(byteLength, "", () => device.alloc(byteLength)),
      release: (address) => device.free(address),
    });
  }

  /**
   * Grows the kernels' scratch block to what a call with these values asks for, now
   * (a prepared call then allocates nothing when it runs).
   */
  reserveScratchFor(kernel: string, values: Float64Array): void {
    const bytes = this.device.scratchBytes(kernel, values);
    if (bytes > this.device.scratchReserved()) onDevice(bytes, ` of scratch for ${kernel}`, () => this.device.reserveScratch(bytes));
  }

  override stats(totalBytes: number): MemoryStats {
    return { ...super.stats(totalBytes), kernelScratchBytes: this.device.scratchReserved() };
  }
}

/** Runs a device allocation of `bytes`; running out of device memory becomes a MemoryError with the sizes and what to do. */
function onDevice<R>(bytes: number, what: string, allocate: () => R): R {
  try {
    return allocate();
  } catch (err) {
    if ((err as { code?: string }).code !== "KILN_OUT_OF_MEMORY") throw err;
    throw new MemoryError(`cannot allocate ${mib(bytes)}${what} on the GPU: ${(err as Error).message}`, {
      where: "GPU memory",
      hint: "use a smaller batch_size or seq_len, --recompute blocks, or --dtype bf16",
    });
  }
}
