import type { KernelName, PoolKernelName } from "./kernel-names.js";
import type { KernelRuntime } from "./kernel-runtime.js";

/** A family of wasm kernels whose argument blocks the native kernels read as they are. */
export interface NativeRouting {
  /** The native entry for `entry` when the runtime runs this family natively, else `entry` itself. */
  entry(rt: KernelRuntime, entry: KernelName): PoolKernelName;
  /** Calls this process has run on the native kernels so far (tests check that the native path ran). */
  calls(): number;
}

/** Routes the wasm entries of `table` to their native ones while `family` runs natively (any other entry stays as it is). */
export function nativeRouting(family: "gelu" | "norm" | "crossEntropy", table: Partial<Record<KernelName, PoolKernelName>>): NativeRouting {
  let calls = 0;
  return {
    entry(rt, entry) {
      const native = rt.native?.[family] ? table[entry] : undefined;
      if (native === undefined) return entry;
      calls++;
      return native;
    },
    calls: () => calls,
  };
}
