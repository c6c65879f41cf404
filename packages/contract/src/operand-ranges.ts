import type { Operand } from "./backend.js";
import { bytesPerElement } from "./dtype.js";
import { KernelArgumentError } from "./errors.js";
import type { KernelSpec } from "./kernels/spec.js";

/** Bytes [ptr, end) of one kernel operand in a backend's address space. */
export interface OperandRange {
  ptr: number;
  end: number;
}

/** Address of `bytes` bytes at `op`, after checking they lie inside its buffer (throws otherwise). */
export type ResolveOperand = (op: Operand, bytes: number, what: string) => number;

const overlaps = (a: OperandRange, b: OperandRange) => a.ptr < b.end && b.ptr < a.end;

/**
 * The address range of every operand present in `args` (keyed as in the spec),
 * each bounds-checked by `resolve`. An output may share memory with another
 * operand only as an exact alias the spec allows, or when both are strided (rows
 * of one packed buffer that interleave); any other overlap, or a missing required
 * operand, is a KernelArgumentError. Backends call this before every kernel.
 */
export function kernelOperandRanges<A>(spec: KernelSpec<A>, args: A, resolve: ResolveOperand): Record<string, OperandRange> {
  const ranges: Record<string, OperandRange> = {};
  const specs = spec.operands(args);
  for (const s of specs) {
    const op = (args as Record<string, Operand | undefined>)[s.key];
    if (op === undefined) {
      if (s.optional) continue;
      throw new KernelArgumentError(`${spec.name}.${s.key} is missing`, { where: spec.name, hint: `pass a buffer for ${s.key}` });
    }
    const bytes = s.elements * bytesPerElement(s.dtype);
    const ptr = resolve(op, bytes, `${spec.name}.${s.key}`);
    ranges[s.key] = { ptr, end: ptr + bytes };
  }
  const aliases = spec.aliases ?? [];
  for (const out of specs) {
    const o = ranges[out.key];
    if (out.role === "in" || o === undefined) continue;
    for (const other of specs) {
      const p = ranges[other.key];
      if (other.key === out.key || p === undefined || !overlaps(o, p) || (out.strided && other.strided)) continue;
      const allowed = aliases.some(([a, b]) => (a === out.key && b === other.key) || (a === other.key && b === out.key));
      if (allowed && o.ptr === p.ptr && o.end === p.end) continue;
      throw new KernelArgumentError(`${spec.name}.${out.key} overlaps ${spec.name}.${other.key}`, {
        where: spec.name,
        hint: allowed ? `${out.key} may name exactly the same memory as ${other.key}, not part of it` : `write ${out.key} into separate memory`,
      });
    }
  }
  return ranges;
}
