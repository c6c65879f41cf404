import { DeviceError, type KernelName, type NativeKernels } from "@kiln/contract";
import { NATIVE_ISAS, type NativeIsa, type NativeIsaKernels } from "./native-addon-types.js";
import { platform } from "#platform";

/** The native kernels a runtime runs: the addon file (each worker loads it too) and the instruction set. */
export interface NativeSetup {
  path: string;
  isa: NativeIsa;
  kernels: NativeIsaKernels;
  /** Whether attention, GELU, the norms and cross-entropy run natively too (an addon built before them has only the matmul). */
  attention: boolean;
  gelu: boolean;
  norm: boolean;
  crossEntropy: boolean;
}

/** Whether the native kernels run, and what capabilities().device.native says about it. */
export interface NativeChoice {
  setup?: NativeSetup;
  info: NativeKernels;
}

const off = (reason: string): NativeChoice => ({ info: { kernels: [], reason } });

/**
 * Picks the native kernels for a runtime. `wanted` is true, or the reason they are not
 * wanted (an option). KILN_NATIVE=0 turns them off; KILN_NATIVE_ISA=avx512, avx2 or neon
 * forces an instruction set (an error when this CPU or build lacks it), else the best one runs.
 * Anything missing (a browser, no addon built, a CPU with neither) leaves the WebAssembly
 * kernels in charge, with the reason.
 */
export function chooseNative(wanted: true | string, sharedMemory: boolean): NativeChoice {
  if (wanted !== true) return off(wanted);
  if (platform.env("KILN_NATIVE") === "0") return off("KILN_NATIVE=0");
  if (!sharedMemory) return off("the memory is not a SharedArrayBuffer");
  const load = platform.loadNativeAddon();
  if ("reason" in load) return off(load.reason);
  const isas = load.addon.isas();
  const forced = platform.env("KILN_NATIVE_ISA");
  if (forced !== undefined && forced !== "") {
    if (!(NATIVE_ISAS as readonly string[]).includes(forced)) {
      throw new DeviceError(`KILN_NATIVE_ISA=${forced} is not an instruction set of the native kernels`, {
        where: "@kiln/kernels-wasm",
        hint: `use one of ${NATIVE_ISAS.join(", ")}, or unset KILN_NATIVE_ISA to take the best this CPU runs`,
      });
    }
    if (!isas.includes(forced as NativeIsa)) {
      throw new DeviceError(`KILN_NATIVE_ISA=${forced}, but this CPU runs ${isas.length ? `only the ${isas.join(", ")} kernels` : "none of the native kernels"}`, {
        where: "@kiln/kernels-wasm",
        hint: "unset KILN_NATIVE_ISA to take the best this CPU runs, or KILN_NATIVE=0 for the WebAssembly kernels",
      });
    }
  }
  const isa = (forced || isas[0]) as NativeIsa | undefined;
  if (!isa) {
    return off(load.addon.arch === "x64" ? "this CPU has neither AVX-512F nor AVX2 with FMA and F16C" : "no native kernels for this CPU architecture (x86-64 and arm64 have them)");
  }
  const kernels = load.addon.kernels(isa);
  const attention = typeof kernels.attentionForward === "function" && typeof kernels.attentionBackward === "function";
  const gelu = typeof kernels.geluForward === "function" && typeof kernels.geluBackward === "function";
  const norm = (["layerNormForward", "layerNormBackward", "rmsNormForward", "rmsNormBackward"] as const).every((k) => typeof kernels[k] === "function");
  const crossEntropy = (["crossEntropyForward", "crossEntropyForwardBackward", "crossEntropyBackward"] as const).every((k) => typeof kernels[k] === "function");
  const names: KernelName[] = [
    "matmul",
    ...(attention ? (["attentionForward", "attentionBackward"] as const) : []),
    ...(gelu ? (["geluForward", "geluBackward"] as const) : []),
    ...(norm ? (["layerNormForward", "layerNormBackward", "rmsNormForward", "rmsNormBackward"] as const) : []),
    ...(crossEntropy ? (["crossEntropyForward", "crossEntropyBackward"] as const) : []),
  ];
  return { setup: { path: load.path, isa, kernels, attention, gelu, norm, crossEntropy }, info: { kernels: names, isa } };
}

/** The families of kernels that run natively, for a device name: "matmul, attention". */
export function nativeFamilies(info: NativeKernels): string {
  return [...new Set(info.kernels.map((k) => k.replace(/(Forward|Backward)$/, "")))].join(", ");
}
