import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { NativeAddon, NativeAddonLoad } from "./native-addon-types.js";

/**
 * Where scripts/build-native.mjs writes the addon: build-native/ in the package folder
 * (one level above both src/ and dist/, so the same URL serves either), or
 * KILN_NATIVE_BUILD_DIR (relative to the package folder). Not in the npm package: an
 * installed package runs the WebAssembly kernels only.
 */
function buildDir(): string {
  return path.resolve(fileURLToPath(new URL("..", import.meta.url)), process.env.KILN_NATIVE_BUILD_DIR || "build-native");
}
const ADDON_ENV = "KILN_NATIVE_ADDON";

function builtAddonPath(): string {
  return path.join(buildDir(), "Release", "kiln_native.node");
}

/** Why there is no addon file: what the build recorded, else how to get one. */
function notBuiltReason(): string {
  const wanted = process.env[ADDON_ENV];
  if (wanted) return `${ADDON_ENV}=${wanted}, but there is no such file`;
  try {
    const info = JSON.parse(fs.readFileSync(path.join(buildDir(), "build-info.json"), "utf8")) as { reason?: string };
    if (info.reason) return info.reason;
  } catch {
    // No build was tried here (an installed package).
  }
  return "addon not built: the native kernels are built from kiln's repository (pnpm --filter @kiln/kernels-wasm build), not shipped in the npm package";
}

let loaded: NativeAddonLoad | undefined;

/** The native addon of this package (KILN_NATIVE_ADDON overrides where), or why not; never throws. */
export function loadNativeAddon(): NativeAddonLoad {
  if (loaded) return loaded;
  const path = process.env[ADDON_ENV] || builtAddonPath();
  if (!fs.existsSync(path)) {
    loaded = { reason: notBuiltReason() };
  } else {
    try {
      loaded = { addon: createRequire(import.meta.url)(path) as NativeAddon, path };
    } catch (error) {
      loaded = { reason: `addon at ${path} failed to load: ${(error as Error).message}` };
    }
  }
  return loaded;
}
