import fs from "node:fs";
import type { Backend } from "@kiln/contract";
import { loadNativeAddon } from "../../src/native-addon-node.js";
import { nativeMatmulCalls } from "../../src/matmul-dispatch.js";

const buildInfo = new URL("../../build-native/build-info.json", import.meta.url);

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

/** `backend`, whose matmul throws unless each call ran on the native kernels. */
export function nativeMatmulOnly(backend: Backend): Backend {
  const matmul = backend.kernels.matmul;
  const kernels = {
    ...backend.kernels,
    matmul: (args: Parameters<typeof matmul>[0]) => {
      const before = nativeMatmulCalls();
      matmul(args);
      if (nativeMatmulCalls() !== before + 1) throw new Error("this matmul did not run on the native kernels");
    },
  };
  return { ...backend, kernels };
}
