import { BufferTable, MemoryError } from "@kiln/contract";
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
  constructor(device: NativeDevice) {
    super({
      allocate(byteLength) {
        try {
          return device.alloc(byteLength);
        } catch (err) {
          if ((err as { code?: string }).code !== "KILN_OUT_OF_MEMORY") throw err;
          throw new MemoryError(`cannot allocate ${mib(byteLength)} on the GPU: ${(err as Error).message}`, {
            where: "GPU memory",
            hint: "use a smaller batch_size or seq_len, --recompute blocks, or --dtype bf16",
          });
        }
      },
      release: (address) => device.free(address),
    });
  }
}
