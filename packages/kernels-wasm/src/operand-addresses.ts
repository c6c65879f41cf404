import { KernelArgumentError, type KernelSpec, type Operand, bytesPerElement } from "@kiln/contract";
import type { BackendMemory } from "./backend-memory.js";

/** Bytes [ptr, end) of one operand in linear memory. */
export interface OperandRange {
  ptr: number;
  end: number;
}

const overlaps = (a: OperandRange, b: OperandRange) => a.ptr < b.end && b.ptr < a.end;
const sameRange = (a: OperandRange, b: OperandRange) => a.ptr === b.ptr && a.end === b.end;

/**
 * The linear-memory range of every operand present in `args` (keyed as in the
 * spec), each bounds-checked against its buffer. An output may share memory with
 * another operand only as an exact alias the spec allows; any other overlap, or a
 * missing required operand, is a KernelArgumentError.
 */
export function operandAddresses<A>(spec: KernelSpec<A>, memory: BackendMemory, args: A): Record<string, OperandRange> {
  const ranges: Record<string, OperandRange> = {};
  const specs = spec.operands(args);
  for (const s of specs) {
    const op = (args as Record<string, Operand | undefined>)[s.key];
    if (op === undefined) {
      if (s.optional) continue;
      throw new KernelArgumentError(`${spec.name}.${s.key} is missing`, { where: spec.name, hint: `pass a buffer for ${s.key}` });
    }
    const bytes = s.elements * bytesPerElement(s.dtype);
    const ptr = memory.address(op, bytes, `${spec.name}.${s.key}`);
    ranges[s.key] = { ptr, end: ptr + bytes };
  }
  const aliases = spec.aliases ?? [];
  for (const out of specs) {
    const o = ranges[out.key];
    if (out.role === "in" || o === undefined) continue;
    for (const other of specs) {
      const p = ranges[other.key];
      if (other.key === out.key || p === undefined || !overlaps(o, p)) continue;
      const allowed = aliases.some(([a, b]) => (a === out.key && b === other.key) || (a === other.key && b === out.key));
      if (allowed && sameRange(o, p)) continue;
      throw new KernelArgumentError(`${spec.name}.${out.key} overlaps ${spec.name}.${other.key}`, {
        where: spec.name,
        hint: allowed ? `${out.key} may name exactly the same memory as ${other.key}, not part of it` : `write ${out.key} into separate memory`,
      });
    }
  }
  return ranges;
}
