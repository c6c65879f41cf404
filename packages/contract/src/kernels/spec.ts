import type { DType, FloatDType } from "../dtype.js";
import { KernelArgumentError } from "../errors.js";

export type OperandRole = "in" | "out" | "inout";

/** How the conformance suite fills an input operand with test data. */
export type OperandInit =
  | { kind: "uniform"; lo: number; hi: number }
  /** integers in [0, max) */
  | { kind: "index"; max: number }
  /** integers in [0, max), with roughly one in ten set to -1 (ignored) */
  | { kind: "target"; max: number }
  /** a random permutation of 0..n-1 (n the operand's elements) */
  | { kind: "permutation" }
  /** group boundaries: 0 = o[0] <= o[1] <= ... <= o[n-1] = total, some groups empty */
  | { kind: "offsets"; total: number }
  /** rows of seqLen tokens cut into documents: each token's value is where its document begins in its row */
  | { kind: "documentStarts"; seqLen: number };

/** One buffer argument of a kernel: which key, read or written, its dtype and element count. */
export interface OperandSpec {
  key: string;
  role: OperandRole;
  dtype: DType;
  /** Elements the kernel may touch, counted from the operand's start (strided layouts included). */
  elements: number;
  /** May be left out of the arguments. */
  optional?: boolean;
  /** Rows with gaps between them: may interleave with another strided operand of the same buffer. */
  strided?: boolean;
  init?: OperandInit;
}

/** The machine-readable half of a kernel's documentation. */
export interface KernelSpec<A> {
  name: string;
  /** Every operand, in a fixed order; optional ones too. */
  operands(args: A): OperandSpec[];
  /** Throws KernelArgumentError when dims are inconsistent. */
  check(args: A): void;
  /** (output, input) pairs that may name the same memory (in-place). */
  aliases?: readonly (readonly [string, string])[];
  /** Floating-point operations of one call (multiply-add = 2). */
  flops?(args: A): number;
}

export function operand(
  key: string,
  role: OperandRole,
  dtype: DType,
  elements: number,
  extra: Partial<Pick<OperandSpec, "optional" | "init" | "strided">> = {},
): OperandSpec {
  return { key, role, dtype, elements, ...extra };
}

/** Throws a KernelArgumentError naming the kernel and the argument unless `cond` holds. */
export function require(kernel: string, cond: boolean, what: string): void {
  if (!cond) {
    throw new KernelArgumentError(what, {
      where: kernel,
      hint: `check the ${kernel} arguments against its layout in @kiln/contract kernels`,
    });
  }
}

/** Every entry is a positive safe integer. */
export function positiveInts(kernel: string, dims: Record<string, number | undefined>): void {
  for (const [k, v] of Object.entries(dims)) {
    if (v === undefined) continue;
    require(kernel, Number.isSafeInteger(v) && v >= 1, `${k} must be a positive integer, got ${v}`);
  }
}

/** Elements spanned by `rows` rows of `width` elements, `stride` elements apart. */
export function stridedExtent(rows: number, width: number, stride: number): number {
  return rows === 0 ? 0 : (rows - 1) * stride + width;
}

/**
 * The dtype of a kernel's gradient outputs: `dtype` itself, or f32 when the caller keeps
 * parameter gradients in f32 while training in bf16 or f16 (mixed precision: inputs in
 * 16 bits, sums in f32 as always, the sum added to an f32 gradient without rounding to
 * 16 bits, so a gradient above f16's 65504 stays finite).
 */
export function wideDtype(dtype: FloatDType, chosen: FloatDType | undefined): FloatDType {
  return chosen ?? dtype;
}

/** A gradient-output dtype must be the kernel's dtype or f32. */
export function checkWideDtype(kernel: string, key: string, dtype: FloatDType, chosen: FloatDType | undefined): void {
  require(kernel, chosen === undefined || chosen === dtype || chosen === "f32", `${key} must be f32 or the kernel's dtype (${dtype}), got ${String(chosen)}`);
}
