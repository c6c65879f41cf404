// The native kernels as pool entry points (argsPtr, part, parts), for the calling thread
// (src/native-setup.ts) and for each Node worker (thread-worker-node.js): the addon
// receives a Uint8Array over the memory's current buffer, taken again whenever the
// memory has grown (memory.buffer is then a new SharedArrayBuffer).

/** @typedef {"kiln_native_matmul_f32" | "kiln_native_matmul_bf16" | "kiln_native_matmul_f16" | "kiln_native_ceiling" | "kiln_native_attention_forward" | "kiln_native_attention_backward" | "kiln_native_gelu_forward" | "kiln_native_gelu_backward" | "kiln_native_layer_norm_forward" | "kiln_native_layer_norm_backward" | "kiln_native_rms_norm_forward" | "kiln_native_rms_norm_backward" | "kiln_native_cross_entropy_forward" | "kiln_native_cross_entropy_forward_backward" | "kiln_native_cross_entropy_backward"} NativeKernelName */

/**
 * Pool names of the native entry points, after the wasm kernels' (kernel-names.ts).
 * @type {readonly NativeKernelName[]}
 */
export const NATIVE_KERNEL_NAMES = [
  "kiln_native_matmul_f32",
  "kiln_native_matmul_bf16",
  "kiln_native_matmul_f16",
  "kiln_native_ceiling",
  "kiln_native_attention_forward",
  "kiln_native_attention_backward",
  "kiln_native_gelu_forward",
  "kiln_native_gelu_backward",
  "kiln_native_layer_norm_forward",
  "kiln_native_layer_norm_backward",
  "kiln_native_rms_norm_forward",
  "kiln_native_rms_norm_backward",
  "kiln_native_cross_entropy_forward",
  "kiln_native_cross_entropy_forward_backward",
  "kiln_native_cross_entropy_backward",
];

/**
 * The native kernels as pool entry points over `memory`.
 * @param {import("./native-addon-types.js").NativeIsaKernels} kernels
 * @param {WebAssembly.Memory} memory
 * @returns {Record<NativeKernelName, (argsPtr: number, part: number, parts: number) => void>}
 */
export function nativeEntries(kernels, memory) {
  let buffer;
  let view;
  const viewOf = () => {
    const current = memory.buffer;
    if (current !== buffer) {
      buffer = current;
      view = new Uint8Array(current);
    }
    return view;
  };
  return {
    kiln_native_matmul_f32: (args, part, parts) => kernels.matmul(viewOf(), args, part, parts, 0),
    kiln_native_matmul_bf16: (args, part, parts) => kernels.matmul(viewOf(), args, part, parts, 1),
    kiln_native_matmul_f16: (args, part, parts) => kernels.matmul(viewOf(), args, part, parts, 2),
    kiln_native_ceiling: (args, part, parts) => kernels.ceiling(viewOf(), args, part, parts),
    kiln_native_attention_forward: (args, part, parts) => kernels.attentionForward(viewOf(), args, part, parts),
    kiln_native_attention_backward: (args, part, parts) => kernels.attentionBackward(viewOf(), args, part, parts),
    kiln_native_gelu_forward: (args, part, parts) => kernels.geluForward(viewOf(), args, part, parts),
    kiln_native_gelu_backward: (args, part, parts) => kernels.geluBackward(viewOf(), args, part, parts),
    kiln_native_layer_norm_forward: (args, part, parts) => kernels.layerNormForward(viewOf(), args, part, parts),
    kiln_native_layer_norm_backward: (args, part, parts) => kernels.layerNormBackward(viewOf(), args, part, parts),
    kiln_native_rms_norm_forward: (args, part, parts) => kernels.rmsNormForward(viewOf(), args, part, parts),
    kiln_native_rms_norm_backward: (args, part, parts) => kernels.rmsNormBackward(viewOf(), args, part, parts),
    kiln_native_cross_entropy_forward: (args, part, parts) => kernels.crossEntropyForward(viewOf(), args, part, parts),
    kiln_native_cross_entropy_forward_backward: (args, part, parts) => kernels.crossEntropyForwardBackward(viewOf(), args, part, parts),
    kiln_native_cross_entropy_backward: (args, part, parts) => kernels.crossEntropyBackward(viewOf(), args, part, parts),
  };
}
