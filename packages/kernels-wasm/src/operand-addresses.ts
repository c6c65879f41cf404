import { type KernelSpec, type OperandRange, kernelOperandRanges } from "@kiln/contract";
import type { BackendMemory } from "./backend-memory.js";

export type { OperandRange };

/** Every operand's range in linear memory, checked as the contract's kernelOperandRanges does. */
export function operandAddresses<A>(spec: KernelSpec<A>, memory: BackendMemory, args: A): Record<string, OperandRange> {
  return kernelOperandRanges(spec, args, (op, bytes, what) => memory.address(op, bytes, what));
}
