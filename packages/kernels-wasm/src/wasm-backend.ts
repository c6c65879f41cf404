import {
  type Backend,
  CONTRACT_VERSION,
  type Capabilities,
  DeviceError,
  KERNEL_NAMES,
  type KernelName,
  type Kernels,

} from "@kiln/contract";
import { BackendMemory } from "./backend-memory.js";
import { WASM_KERNELS, type WasmKernel } from "./kernel-table.js";
import { type CeilingResult, measureCeiling, measureNativeCeiling } from "./ceiling-call.js";
import { createKernelRuntime, type KernelRuntime, type RuntimeInfo, type RuntimeOptions } from "./kernel-runtime.js";
import { nativeFamilies } from "./native-setup.js";

/**
 * Supplies capabilities().peakFlops.f32 for a runtime with this SIMD variant, thread count
 * and native kernels (info.native), e.g. from a cache, calling `ceiling` (multiply-add
 * throughput on every thread, `iterations` rounds per thread: the native kernels' own FMA
 * loop when the matmul runs natively, else the WebAssembly one) to measure when it has no figure.
 */
export type PeakFlopsSource = (info: RuntimeInfo, ceiling: (iterations: number) => CeilingResult) => number | undefined;

export interface WasmBackendOptions extends RuntimeOptions {
  /**
   * Run the matmul natively (AVX-512 or AVX2, the package's Node addon) where it is built
   * and the CPU runs it (default true); false, KILN_NATIVE=0 or a browser: the WebAssembly kernel.
   */
  native?: boolean;
  /** Measure the multiply-add ceiling at creation for capabilities().peakFlops (about 30 ms; default true). */
  measurePeak?: boolean;
  /** Where the f32 peak comes from instead of the start-up measurement (`measurePeak` is then ignored). */
  peakFlops?: PeakFlopsSource;
}

function bytesOf(data: ArrayBufferView): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** The ceiling of the kernels the matmul runs on: the native FMA loop, or the wasm one. */
function ceilingOf(rt: KernelRuntime): (iterations: number) => CeilingResult {
  return rt.native ? (iterations) => measureNativeCeiling(rt, iterations, rt.info.threads) : (iterations) => measureCeiling(rt, iterations, rt.info.threads);
}

/** V8 runs a wasm function in its baseline tier until it has been called often: warm up, then measure. */
function measurePeakFlops(rt: KernelRuntime): number {
  const ceiling = ceilingOf(rt);
  if (rt.native) {
    // Machine code needs no warm-up beyond a few calls for the clock to settle: about 20 ms.
    for (let i = 0; i < 10; i++) ceiling(20_000);
    return ceiling(400_000).gflops * 1e9;
  }
  for (let i = 0; i < 400; i++) ceiling(200);
  return ceiling(200_000).gflops * 1e9;
}

/**
 * The contract's Backend on WebAssembly SIMD kernels in one linear memory,
 * run by every core. Kernels run synchronously on the calling thread plus the
 * pool's workers, so every call is complete when it returns.
 */
export async function createWasmBackend(options: WasmBackendOptions = {}): Promise<Backend> {
  const rt = await createKernelRuntime({ ...options, native: options.native ?? true });
  const memory = new BackendMemory(rt.heap);
  const peakF32 = options.peakFlops
    ? options.peakFlops(rt.info, ceilingOf(rt))
    : options.measurePeak === false
      ? undefined
      : measurePeakFlops(rt);
  let disposed = false;

  const notImplemented = (name: KernelName) => () => {
    throw new DeviceError(`kernel ${name} is not implemented by the wasm backend yet`, {
      where: `@kiln/kernels-wasm ${name}`,
      hint: "capabilities().kernelDTypes lists the kernels this backend runs",
    });
  };
  const ctx = { rt, memory };
  const kernels = Object.fromEntries(
    KERNEL_NAMES.map((name) => {
      const k = WASM_KERNELS[name] as WasmKernel<KernelName> | undefined;
      return [name, k ? (args: never) => k.run(ctx, args) : notImplemented(name)];
    }),
  ) as Record<KernelName, unknown>;

  const kernelDTypes = Object.fromEntries(KERNEL_NAMES.map((name) => [name, WASM_KERNELS[name]?.dtypes ?? []])) as unknown as Capabilities["kernelDTypes"];
  const simdName = rt.info.simd === "relaxed" ? "relaxed-simd" : "simd128";
  const view = () => new Uint8Array(rt.memory.buffer);

  return {
    contractVersion: CONTRACT_VERSION,
    name: "wasm",
    capabilities: () => ({
      device: {
        name: `WebAssembly SIMD (${rt.info.simd})${rt.native ? `, native ${nativeFamilies(rt.info.native)} (${rt.native.isa})` : ""} x ${rt.info.threads} thread${rt.info.threads > 1 ? "s" : ""}`,
        kind: "cpu",
        memoryBytes: rt.info.maxMemoryBytes,
        parallelism: rt.info.threads,
        simd: simdName,
        native: rt.info.native,
      },
      kernelDTypes,
      peakFlops: peakF32 === undefined ? {} : { f32: peakF32 },
    }),
    alloc: (byteLength) => memory.alloc(byteLength),
    free: (buffer) => memory.free(buffer),
    upload(dst, data) {
      const ptr = memory.address(dst, data.byteLength, "upload");
      view().set(bytesOf(data), ptr);
    },
    async download(src, out) {
      const ptr = memory.address(src, out.byteLength, "download");
      bytesOf(out).set(view().subarray(ptr, ptr + out.byteLength));
    },
    copy(src, dst, byteLength) {
      const from = memory.address(src, byteLength, "copy source");
      const to = memory.address(dst, byteLength, "copy destination");
      view().copyWithin(to, from, from + byteLength);
    },
    memoryStats: () => memory.stats(rt.info.maxMemoryBytes),
    resetPeakMemory: () => memory.resetPeak(),
    kernels: kernels as unknown as Kernels,
    synchronize: async () => {},
    dispose() {
      if (disposed) return;
      disposed = true;
      memory.clear();
      void rt.dispose();
    },
  };
}

