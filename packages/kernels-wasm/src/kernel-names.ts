import { NATIVE_KERNEL_NAMES, type NativeKernelName } from "./native-entries.js";

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
  "kiln_cross_entropy_forward_backward",
  "kiln_softmax_forward",
  "kiln_add",
  "kiln_scale",
  "kiln_dropout",
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
  "kiln_layer_norm_forward",
  "kiln_layer_norm_backward",
  "kiln_rms_norm_forward",
  "kiln_rms_norm_backward",
  "kiln_norm_param_grad_reduce",
  "kiln_gelu_forward",
  "kiln_gelu_backward",
  "kiln_silu_forward",
  "kiln_silu_backward",
  "kiln_swiglu_forward",
  "kiln_swiglu_backward",
  "kiln_geglu_forward",
  "kiln_geglu_backward",
  "kiln_rope",
  "kiln_embedding_forward",
  "kiln_embedding_group",
  "kiln_embedding_backward",
  "kiln_grouped_matmul",
  "kiln_grouped_matmul_weight_grad",
  "kiln_moe_route",
  "kiln_moe_route_offsets",
  "kiln_moe_route_backward",
  "kiln_moe_dispatch",
  "kiln_moe_combine",
  "kiln_moe_combine_scale_grad",
  "kiln_copy_strided",
  "kiln_conv1d_causal_forward",
  "kiln_conv1d_causal_backward",
  "kiln_ssd_scan_forward",
  "kiln_ssd_scan_backward",
  "kiln_ssd_scan_param_reduce",
  "kiln_mamba3_scan_forward",
  "kiln_mamba3_scan_backward",
  "kiln_mamba3_scan_param_reduce",
] as const;

export type KernelName = (typeof KERNEL_NAMES)[number];

/** What a pool may run: the module's kernels, then the native ones (native-entries.js) where they are loaded. */
export type PoolKernelName = KernelName | NativeKernelName;
export const POOL_KERNEL_NAMES: readonly PoolKernelName[] = [...KERNEL_NAMES, ...NATIVE_KERNEL_NAMES];

export function kernelIndex(name: PoolKernelName): number {
  return POOL_KERNEL_NAMES.indexOf(name);
}
