import { DeviceError } from "@kiln/contract";
import type { SimdVariant } from "./simd-support.js";

export type MemoryKind = "shared" | "single";

const isNode = typeof process !== "undefined" && typeof process.versions?.node === "string";

/** Where the build step (scripts/build-wasm.mjs) puts a module; the same from src/ and dist/. */
export function wasmModuleUrl(simd: SimdVariant, memory: MemoryKind): URL {
  return new URL(`../build/kernels-${simd}-${memory}.wasm`, import.meta.url);
}

async function readBytes(url: URL): Promise<ArrayBuffer | Uint8Array> {
  if (isNode && url.protocol === "file:") {
    const { readFile } = await import("node:fs/promises");
    return readFile(url);
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url.href}`);
  return response.arrayBuffer();
}

/** Compiles the module for a SIMD variant and memory kind, with a clear error when it was never built. */
export async function loadKernelModule(simd: SimdVariant, memory: MemoryKind): Promise<WebAssembly.Module> {
  const url = wasmModuleUrl(simd, memory);
  let bytes: ArrayBuffer | Uint8Array;
  try {
    bytes = await readBytes(url);
  } catch (cause) {
    throw new DeviceError(`the WebAssembly kernels (${url.pathname.split("/").pop()}) are not built`, {
      where: url.href,
      hint: "run `pnpm --filter @kiln/kernels-wasm build` (needs the Debian packages clang-16 and lld-16, or emscripten)",
      cause,
    });
  }
  return WebAssembly.compile(bytes as BufferSource);
}

/** Whether the relaxed build is present on disk (an emcc-only build has just the plain one). */
export async function hasKernelModule(simd: SimdVariant, memory: MemoryKind): Promise<boolean> {
  try {
    await readBytes(wasmModuleUrl(simd, memory));
    return true;
  } catch {
    return false;
  }
}
