import type { KernelName } from "./kernel-names.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import type { NativeKernelName } from "./native-entries.js";

/** The activations that run natively: they read the WebAssembly kernel's ActivationArgs block as it is. */
const NATIVE_ENTRY: Partial<Record<KernelName, NativeKernelName>> = {
  kiln_gelu_forward: "kiln_native_gelu_forward",
  kiln_gelu_backward: "kiln_native_gelu_backward",
};

let nativeCalls = 0;

/** Activation calls this process has run on the native kernels so far (tests check that the native path ran). */
export function nativeActivationCalls(): number {
  return nativeCalls;
}

/** The native entry point for the WebAssembly activation `entry` when the runtime runs it natively, else undefined. */
export function nativeActivationEntry(rt: KernelRuntime, entry: KernelName): NativeKernelName | undefined {
  const native = rt.native?.gelu ? NATIVE_ENTRY[entry] : undefined;
  if (native) nativeCalls++;
  return native;
}
