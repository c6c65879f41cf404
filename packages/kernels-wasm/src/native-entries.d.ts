// Types of native-entries.js (plain JavaScript, shared with the unbundled Node worker).
import type { NativeIsaKernels } from "./native-addon-types.js";

export type NativeKernelName =
  | "kiln_native_matmul_f32"
  | "kiln_native_matmul_bf16"
  | "kiln_native_matmul_f16"
  | "kiln_native_ceiling"
  | "kiln_native_attention_forward"
  | "kiln_native_attention_backward"
  | "kiln_native_gelu_forward"
  | "kiln_native_gelu_backward"
  | "kiln_native_layer_norm_forward"
  | "kiln_native_layer_norm_backward"
  | "kiln_native_rms_norm_forward"
  | "kiln_native_rms_norm_backward"
  | "kiln_native_cross_entropy_forward"
  | "kiln_native_cross_entropy_forward_backward"
  | "kiln_native_cross_entropy_backward";
export declare const NATIVE_KERNEL_NAMES: readonly NativeKernelName[];

/** The native kernels as pool entry points over `memory`. */
export declare function nativeEntries(kernels: NativeIsaKernels, memory: WebAssembly.Memory): Record<NativeKernelName, (argsPtr: number, part: number, parts: number) => void>;
