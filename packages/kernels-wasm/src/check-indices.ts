import { KernelArgumentError } from "@kiln/contract";
import type { KernelRuntime } from "./kernel-runtime.js";

/**
 * Every i32 of `count` at `ptr` must lie in [0, limit): a kernel uses them as
 * row numbers, so they are checked before anything is written.
 */
export function checkIndices(rt: KernelRuntime, where: string, ptr: number, count: number, limit: number, hint: string): void {
  const view = new DataView(rt.memory.buffer, ptr, count * 4);
  for (let i = 0; i < count; i++) {
    const v = view.getInt32(i * 4, true);
    if (!(v >= 0 && v < limit)) {
      throw new KernelArgumentError(`index ${v} at position ${i} is outside [0, ${limit})`, { where, hint });
    }
  }
}
