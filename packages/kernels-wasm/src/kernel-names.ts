/**
 * Entry points every kernel module exports with the pool calling convention
 * `(argsPtr, thread, nthreads)`. A kernel is addressed by its index here,
 * both on the calling thread and in the workers.
 */
export const KERNEL_NAMES = [
  "kiln_matmul_f32",
  "kiln_ceiling_madd",
  "kiln_cross_entropy_forward",
  "kiln_cross_entropy_backward",
  "kiln_softmax_forward",
  "kiln_add",
  "kiln_scale",
  "kiln_sum",
  "kiln_sum_squares",
  "kiln_sum_rows",
  "kiln_adamw",
  "kiln_cast",
  "kiln_fill",
  "kiln_check_finite",
  "kiln_matmul_bf16",
  "kiln_matmul_f16",
  "kiln_attention_forward",
  "kiln_attention_backward",
] as const;

export type KernelName = (typeof KERNEL_NAMES)[number];

export function kernelIndex(name: KernelName): number {
  return KERNEL_NAMES.indexOf(name);
}
