import fs from "node:fs";
import type { Backend } from "@kiln/contract";
import { loadNativeAddon } from "../../src/native-addon-node.js";
import { nativeActivations } from "../../src/activation-dispatch.js";
import { nativeAttentionCalls } from "../../src/attention-dispatch.js";
import { nativeMatmulCalls } from "../../src/matmul-dispatch.js";
import { nativeCrossEntropy } from "../../src/backend-cross-entropy.js";
import { nativeNorms } from "../../src/backend-norm.js";

const buildInfo = new URL("../../build-native/build-info.json", import.meta.url);

/** The kernels that run natively (in this order in capabilities().device.native.kernels). */
export const NATIVE_KERNELS: readonly string[] = [
  "matmul",
  "attentionForward",
  "attentionBackward",
  "geluForward",
  "geluBackward",
  "layerNormForward",
  "layerNormBackward",
  "rmsNormForward",
  "rmsNormBackward",
  "crossEntropyForward",
  "crossEntropyBackward",
];

/**
 * Why the native kernels cannot run on this machine (no C++ toolchain when the package was
 * built, or a CPU with none of their instruction sets), or undefined when they must: an
 * addon that was built but does not load is a failure, not a skip.
 */
export function nativeSkipReason(): string | undefined {
  const info = fs.existsSync(buildInfo) ? (JSON.parse(fs.readFileSync(buildInfo, "utf8")) as { missingToolchain?: boolean; reason?: string }) : undefined;
  if (info?.missingToolchain) return info.reason;
  const load = loadNativeAddon();
  if ("reason" in load) return undefined; // built, or meant to be: the tests fail and say why
  return load.addon.isas().length ? undefined : "this CPU runs none of the native kernels' instruction sets";
}

/** The instruction sets the native tests run on: every one this CPU has. */
export function nativeIsas(): string[] {
  const load = loadNativeAddon();
  return "addon" in load ? load.addon.isas() : [];
}

/** Runs `make` with KILN_NATIVE_ISA (and any other variables) set, restoring them afterwards. */
export async function withEnv<T>(vars: Record<string, string | undefined>, make: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(vars);
  try {
    return await make();
  } finally {
    set(saved);
  }
}

const checked = <A>(run: (args: A) => void, calls: () => number, native: (args: A) => boolean, what: string) => (args: A) => {
  const before = calls();
  run(args);
  const ran = calls() === before + 1;
  if (ran !== native(args)) throw new Error(ran ? `this ${what} ran natively, but should not have` : `this ${what} did not run on the native kernels`);
};

/** `backend`, whose matmul throws unless each call ran on the native kernels. */
export function nativeMatmulOnly(backend: Backend): Backend {
  return { ...backend, kernels: { ...backend.kernels, matmul: checked(backend.kernels.matmul, nativeMatmulCalls, () => true, "matmul") } };
}

/**
 * `backend`, whose matmul, attention, GELU, norms and cross-entropy throw unless each call ran on the native
 * kernels (attention with `docStarts` must run on the WebAssembly kernel instead).
 */
export function nativeKernelsOnly(backend: Backend): Backend {
  const k = nativeMatmulOnly(backend).kernels;
  const noDocs = (args: { docStarts?: unknown }) => args.docStarts === undefined;
  const kernels = {
    ...k,
    attentionForward: checked(k.attentionForward, nativeAttentionCalls, noDocs, "attentionForward"),
    attentionBackward: checked(k.attentionBackward, nativeAttentionCalls, noDocs, "attentionBackward"),
    geluForward: checked(k.geluForward, nativeActivations.calls, () => true, "geluForward"),
    geluBackward: checked(k.geluBackward, nativeActivations.calls, () => true, "geluBackward"),
    layerNormForward: checked(k.layerNormForward, nativeNorms.calls, () => true, "layerNormForward"),
    layerNormBackward: checked(k.layerNormBackward, nativeNorms.calls, () => true, "layerNormBackward"),
    rmsNormForward: checked(k.rmsNormForward, nativeNorms.calls, () => true, "rmsNormForward"),
    rmsNormBackward: checked(k.rmsNormBackward, nativeNorms.calls, () => true, "rmsNormBackward"),
    crossEntropyForward: checked(k.crossEntropyForward, nativeCrossEntropy.calls, () => true, "crossEntropyForward"),
    crossEntropyBackward: checked(k.crossEntropyBackward, nativeCrossEntropy.calls, () => true, "crossEntropyBackward"),
  };
  return { ...backend, kernels };
}
