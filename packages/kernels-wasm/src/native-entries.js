// The native kernels as pool entry points (argsPtr, part, parts), for the calling thread
// (src/native-setup.ts) and for each Node worker (thread-worker-node.js): the addon
// receives a Uint8Array over the memory's current buffer, taken again whenever the
// memory has grown (memory.buffer is then a new SharedArrayBuffer).

/** @typedef {"kiln_native_matmul_f32" | "kiln_native_matmul_bf16" | "kiln_native_matmul_f16" | "kiln_native_ceiling"} NativeKernelName */

/**
 * Pool names of the native entry points, after the wasm kernels' (kernel-names.ts).
 * @type {readonly NativeKernelName[]}
 */
export const NATIVE_KERNEL_NAMES = ["kiln_native_matmul_f32", "kiln_native_matmul_bf16", "kiln_native_matmul_f16", "kiln_native_ceiling"];

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
  };
}
