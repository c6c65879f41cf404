export { createKernels, Kernels, type KernelsOptions, type KernelsInfo, type MatmulArrays, type MatmulBuffers } from "./kernels.js";
export { F32Buffer } from "./f32-buffer.js";
export type { MatmulOptions } from "./matmul-options.js";
export type { CeilingResult } from "./ceiling-call.js";
export { SharedHeap, type HeapStats, WASM32_MAX_BYTES } from "./shared-heap.js";
export { createKernelRuntime, type KernelRuntime, type RuntimeOptions, type RuntimeInfo } from "./kernel-runtime.js";
export { runMatmul, type MatmulCall } from "./matmul-call.js";
export type { SimdVariant } from "./simd-support.js";
export { createWasmBackend, type PeakFlopsSource, type WasmBackendOptions } from "./wasm-backend.js";
