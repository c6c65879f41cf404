// What a browser bundle gets for "@kiln/kernels-cuda" (the package's "browser" and
// "default" export): the same names as the Node entry and no node: import. The GPU
// table works; the status says there is no GPU backend, and the backends throw saying why.
import { type Backend, DeviceError } from "@kiln/contract";
import type { CudaBackendOptions } from "./create-cuda-backend.js";
import type { CudaSimOptions } from "./cuda-sim-options.js";
import type { CudaStatus } from "./cuda-status.js";
import type { NcclCollectives, NcclCollectivesOptions, NcclLibraryStatus } from "./nccl.js";

export type { CudaBackendOptions, CudaSimOptions, CudaStatus, NcclCollectives, NcclCollectivesOptions, NcclLibraryStatus };
export { GPU_PROFILES, gpuPeakFlops, gpuProfileForName, type GpuProfile } from "./gpu-peaks.js";

const WHY = "@kiln/kernels-cuda runs in Node only: its CUDA kernels are a Node native addon, which a browser cannot load";
const HINT = "in a browser, use @kiln/kernels-wasm (WebAssembly kernels on the CPU's cores)";

export function cudaStatus(): CudaStatus {
  return {
    driver: { found: false, detail: WHY },
    addon: { built: false, archs: [], detail: WHY },
    runtime: { deviceCount: 0, driverVersion: 0, runtimeVersion: 0, error: WHY },
    simulator: { built: false, detail: WHY },
    libraries: { cublas: null, cublasLt: null, nccl: null },
    libraryVersions: {},
    nccl: ncclLibraryStatus(),
  };
}

export function createCudaBackend(_options: CudaBackendOptions = {}): Backend {
  throw new DeviceError(`cannot use the GPU: ${WHY}`, { where: "@kiln/kernels-cuda", hint: HINT });
}

export function createCudaSimBackend(_options: CudaSimOptions = {}): Backend {
  throw new DeviceError(`cannot use the CUDA simulator: ${WHY}`, { where: "@kiln/kernels-cuda", hint: HINT });
}

/** Shared libraries are a Node matter: always null here. */
export function findSharedLibrary(_names: readonly string[]): string | null {
  return null;
}

export function ncclLibraryStatus(): NcclLibraryStatus {
  return { found: false, problem: WHY, hint: HINT };
}

export function ncclUniqueId(): Uint8Array {
  throw new DeviceError(`cannot use NCCL: ${WHY}`, { where: "@kiln/kernels-cuda", hint: HINT });
}

export async function openNcclCollectives(_backend: Backend, _options: NcclCollectivesOptions): Promise<NcclCollectives> {
  throw new DeviceError(`cannot use NCCL: ${WHY}`, { where: "@kiln/kernels-cuda", hint: HINT });
}
