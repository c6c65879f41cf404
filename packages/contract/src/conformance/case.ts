import type { DType } from "../dtype.js";
import type { KernelArgsMap, KernelName } from "../kernels/index.js";

/** Everything in a kernel's arguments except its buffers. */
export type KernelDims<K extends KernelName> = Record<string, unknown> & Partial<KernelArgsMap[K]>;

/** Shape classes every kernel is tried on. */
export type ShapeClass = "one" | "prime" | "odd" | "long" | "batch" | "large" | "strided" | "in-place" | "options" | "special";

/** One conformance case: a kernel, a dtype, dims, and which optional operands take part. */
export interface ConformanceCase {
  kernel: KernelName;
  dtype: DType;
  shape: ShapeClass;
  /** Readable dims, e.g. "m=7 n=13 k=37 transB". */
  label: string;
  args: Record<string, unknown>;
  /** Optional operands to pass. */
  present?: readonly string[];
  /** Run in place: the first operand names the same memory as the second. */
  inPlace?: readonly [string, string];
  /**
   * Operands that share one buffer, each at an element offset: { q: 0, k: C, v: 2C }
   * is a packed qkv buffer (their strided rows interleave).
   */
  shared?: readonly Record<string, number>[];
  /** Replaces generated inputs with consistent ones (saved statistics, special values). */
  derive?: (args: Record<string, unknown>, values: Record<string, Float64Array>) => void;
}

/** Full test name: "matmul bf16 prime m=7 n=13 k=37". */
export function caseName(c: ConformanceCase): string {
  return `${c.kernel} ${c.dtype} ${c.shape} ${c.label}`;
}
