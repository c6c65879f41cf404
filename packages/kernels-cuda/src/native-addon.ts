import fs from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { CudaSimOptions } from "./cuda-sim-options.js";

/** The native addon's face (csrc/addon/addon.cc); the simulator has the same one. */
export interface NativeDevice {
  properties(): { name: string; totalBytes: number; freeBytesAtOpen: number; computeCapability: string; multiprocessors: number; sharedMemoryPerBlock: number };
  alloc(bytes: number): number;
  free(address: number): void;
  upload(address: number, data: ArrayBufferView): void;
  download(address: number, out: ArrayBufferView): Promise<void>;
  copy(dst: number, src: number, bytes: number): void;
  launch(kernel: string, values: Float64Array): void;
  /** The scratch bytes a launch with these values would ask for (its launcher runs with nothing launched). */
  scratchBytes(kernel: string, values: Float64Array): number;
  /** Grows the kernels' scratch block to at least `bytes` now. */
  reserveScratch(bytes: number): void;
  /** Bytes of the kernels' scratch block. */
  scratchReserved(): number;
  synchronize(): Promise<void>;
  /** Enqueues a timing mark (the device takes the time as it reaches it). */
  mark(): void;
  /** Once the marks since the last read are done: each one's ms after the first. */
  readMarks(): Promise<Float64Array>;
  /** Records the kernels issued until endGraph() into a CUDA graph (they run when it is launched). */
  beginGraph(): void;
  endGraph(): number;
  /** false, running nothing, when the graph is stale (a kernel's scratch memory moved since it was recorded). */
  launchGraph(id: number): boolean;
  dropGraph(id: number): void;
  allocatorStats(): { allocatedBytes: number; reservedBytes: number; peakReservedBytes: number; deviceAllocations: number; cacheHits: number; liveBlocks: number };
  emptyCache(): void;
  freeBytes(): number;
  close(): void;
  /** Routes matmuls through cuBLASLt loaded from `path` (TF32 for f32 when asked); returns its version; throws why not. */
  useCublasLt?(path: string, tf32: boolean): string;
  /** Joins an NCCL communicator on this device (csrc/addon/nccl_bindings.cc); rejects with a coded error. */
  openNccl?(libraryPath: string, uniqueId: Uint8Array, rank: number, worldSize: number, timeoutMs: number): Promise<NativeNccl>;
}

/** One rank's NCCL communicator: collectives on device addresses, resolved when done on the device. */
export interface NativeNccl {
  allReduce(address: number, count: number, dtypeCode: number, mean: boolean): Promise<void>;
  broadcast(address: number, bytes: number, root: number): Promise<void>;
  /** `count` elements per rank; the address is the whole buffer's (the addon finds this rank's chunk). */
  reduceScatter(address: number, count: number, dtypeCode: number, mean: boolean): Promise<void>;
  /** `bytes` per rank; the address is the whole buffer's. */
  allGather(address: number, bytes: number): Promise<void>;
  close(): void;
}

export interface NativeStatus {
  simulated: boolean;
  driverVersion: number;
  runtimeVersion: number;
  deviceCount: number;
  /** Why no device is usable ("no NVIDIA driver", ...); empty when one is. */
  error: string;
  /** Compute capabilities with SASS in this build, e.g. "80,86,89,90,100,120". */
  archs: string;
  kernels: string[];
}

export interface NativeAddon {
  status(): NativeStatus;
  Device: new (ordinal: number) => NativeDevice;
  /** The version ("13.0.2") of the library at `path`, read through its own version function; throws why not. */
  libraryVersion(path: string, kind: "cublasLt" | "nccl"): string;
  /** Loads NCCL from `path` (a file or "libnccl.so.2") and checks it; throws with code KILN_NCCL_MISSING, _TOO_OLD or _SYMBOL. */
  ncclLibrary?(path: string): { path: string; version: string };
  /** ncclGetUniqueId through the NCCL at `path`: 128 bytes. */
  ncclUniqueId?(path: string): Uint8Array;
  setSimOptions?(options: CudaSimOptions): void;
}

export type AddonKind = "cuda" | "sim";

const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));
const FILES: Record<AddonKind, { dir: string; file: string; env: string }> = {
  cuda: { dir: "build", file: "kiln_cuda.node", env: "KILN_CUDA_ADDON" },
  sim: { dir: "build-sim", file: "kiln_cuda_sim.node", env: "KILN_CUDA_SIM_ADDON" },
};

/** Where the package's own build puts an addon: build/Release/ or build-sim/Release/ in the package folder. */
function builtAddonPath(kind: AddonKind): string {
  const f = FILES[kind];
  return `${PACKAGE_ROOT}${f.dir}/Release/${f.file}`;
}

/** Where an addon is (KILN_CUDA_ADDON / KILN_CUDA_SIM_ADDON override the package's build folders). */
export function addonPath(kind: AddonKind): string {
  return process.env[FILES[kind].env] || builtAddonPath(kind);
}

/** Why the addon file is missing: what the build said (scripts/build-addon.mjs writes it), else where to get one. */
function notBuiltReason(kind: AddonKind): string {
  const f = FILES[kind];
  const wanted = process.env[f.env];
  if (wanted) return `${f.env}=${wanted}, but there is no such file`;
  try {
    const info = JSON.parse(fs.readFileSync(`${PACKAGE_ROOT}${f.dir}/build-info.json`, "utf8")) as { reason?: string };
    if (info.reason) return info.reason;
  } catch {
    // no build was attempted in this folder (an installed package)
  }
  return (
    `${builtAddonPath(kind)} does not exist (the ${kind === "cuda" ? "CUDA addon" : "CUDA simulator"} is not in the npm package): ` +
    `build it in kiln's repository with 'pnpm --filter @kiln/kernels-cuda build' and set ${f.env} to the ${f.file} it writes`
  );
}

const loaded = new Map<AddonKind, { addon?: NativeAddon; reason?: string }>();

/** The addon, or why it cannot be loaded (not built, or a load error), never a throw. */
export function loadAddon(kind: AddonKind): { addon?: NativeAddon; reason?: string } {
  const cached = loaded.get(kind);
  if (cached) return cached;
  let result: { addon?: NativeAddon; reason?: string };
  const file = addonPath(kind);
  if (!fs.existsSync(file)) {
    result = { reason: notBuiltReason(kind) };
  } else {
    try {
      result = { addon: createRequire(import.meta.url)(file) as NativeAddon };
    } catch (err) {
      result = { reason: `${file} failed to load: ${(err as Error).message}` };
    }
  }
  loaded.set(kind, result);
  return result;
}
