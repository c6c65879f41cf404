import type { KernelRuntime } from "./kernel-runtime.js";
import { type MatmulCall, type MatmulDType, matmulThreads, runMatmul, writeMatmulArgs } from "./matmul-call.js";
import type { NativeKernelName } from "./native-entries.js";

const NATIVE_ENTRY: Record<MatmulDType, NativeKernelName> = {
  f32: "kiln_native_matmul_f32",
  bf16: "kiln_native_matmul_bf16",
  f16: "kiln_native_matmul_f16",
};

let nativeCalls = 0;

/** Matmuls this process has run on the native kernels so far (tests check that the native path ran). */
export function nativeMatmulCalls(): number {
  return nativeCalls;
}

/**
 * One matmul on the runtime's pool: on the native kernels when the runtime loaded them
 * (every form of the call: they read the same argument block, on the same threads, and
 * sum as the WebAssembly kernel does), else on the WebAssembly kernel.
 */
export function dispatchMatmul(rt: KernelRuntime, call: MatmulCall, maxThreads?: number): void {
  if (!rt.native) {
    runMatmul(rt, call, maxThreads);
    return;
  }
  writeMatmulArgs(rt, call);
  rt.run(NATIVE_ENTRY[call.dtype ?? "f32"], matmulThreads(rt, call, maxThreads));
  nativeCalls++;
}
