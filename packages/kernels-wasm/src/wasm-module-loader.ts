import { DeviceError } from "@kiln/contract";
import type { SimdVariant } from "./simd-support.js";
import { platform } from "#platform";

export type MemoryKind = "shared" | "single";

/**
 * Where the build step (scripts/build-wasm.mjs) puts each module. Each URL is
 * written out in full so that bundlers see it (Vite and webpack copy the file and
 * rewrite the URL, as does Rollup with importMetaAssets); scripts/bundle-dist.mjs
 * points them at dist/assets/.
 */
const MODULE_URLS: Record<`${SimdVariant}-${MemoryKind}`, () => URL> = {
  "relaxed-shared": () => new URL("../build/kernels-relaxed-shared.wasm", import.meta.url),
  "relaxed-single": () => new URL("../build/kernels-relaxed-single.wasm", import.meta.url),
  "plain-shared": () => new URL("../build/kernels-plain-shared.wasm", import.meta.url),
  "plain-single": () => new URL("../build/kernels-plain-single.wasm", import.meta.url),
};

/** Compiled modules by URL: each file is read (fetched) once per page or process. */
const compiled = new Map<string, Promise<WebAssembly.Module | undefined>>();

const WASM_MAGIC = [0x00, 0x61, 0x73, 0x6d];

function notLoadable(url: URL, what: string, cause?: unknown): DeviceError {
  const file = url.pathname.split("/").pop();
  return new DeviceError(`the WebAssembly kernels (${file}) ${what} at ${url.href}`, {
    where: "@kiln/kernels-wasm",
    hint:
      "the package loads them with new URL(..., import.meta.url) from its dist/assets/ folder. " +
      'Vite dev server: add optimizeDeps: { exclude: ["@kiln/kernels-wasm"] } to vite.config. ' +
      "esbuild: copy node_modules/@kiln/kernels-wasm/dist/assets/ to an assets/ folder beside the bundle. " +
      'Rollup: add importMetaAssets({ include: "**/@kiln/kernels-wasm/**" }) from @web/rollup-plugin-import-meta-assets ' +
      "to its plugins, or copy the assets as for esbuild. " +
      "In kiln's repository: pnpm --filter @kiln/kernels-wasm build",
    ...(cause === undefined ? {} : { cause }),
  });
}

async function compile(url: URL): Promise<WebAssembly.Module | undefined> {
  let bytes: Uint8Array | ArrayBuffer | undefined;
  try {
    bytes = await platform.readBytes(url);
  } catch (cause) {
    throw notLoadable(url, "could not be read", cause);
  }
  if (bytes === undefined) return undefined;
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (!WASM_MAGIC.every((b, i) => view[i] === b)) throw notLoadable(url, "are not a WebAssembly module (an HTML page or a rewritten path?)");
  return WebAssembly.compile(bytes as BufferSource);
}

/**
 * The compiled module for a SIMD variant and memory kind, or undefined when
 * that file is absent (an emcc-only build has no relaxed modules).
 */
export function loadKernelModule(simd: SimdVariant, memory: MemoryKind): Promise<WebAssembly.Module | undefined> {
  const url = MODULE_URLS[`${simd}-${memory}`]();
  let module = compiled.get(url.href);
  if (!module) {
    module = compile(url);
    compiled.set(url.href, module);
    module.catch(() => compiled.delete(url.href));
  }
  return module;
}

/** Like loadKernelModule, with a clear error when the file is absent. */
export async function requireKernelModule(simd: SimdVariant, memory: MemoryKind): Promise<WebAssembly.Module> {
  const module = await loadKernelModule(simd, memory);
  if (!module) throw notLoadable(MODULE_URLS[`${simd}-${memory}`](), "were not found");
  return module;
}
