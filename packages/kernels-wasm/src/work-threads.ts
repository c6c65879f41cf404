import type { KernelRuntime } from "./kernel-runtime.js";
import { threadsFor } from "./matmul-call.js";

/**
 * Threads worth waking for `units` independent pieces of work (rows, chunks of
 * elements) costing about `unitCost` flops each: never more than there are
 * pieces, and one more thread per minFlopsPerThread of work.
 */
export function threadsForWork(rt: KernelRuntime, units: number, unitCost: number): number {
  return Math.max(1, Math.min(units, threadsFor(units * unitCost, rt.info.threads, rt.info.minFlopsPerThread)));
}
