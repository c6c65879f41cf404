export { cudaStatus, type CudaStatus } from "./cuda-status.js";
export { createCudaBackend, createCudaSimBackend, type CudaBackendOptions } from "./create-cuda-backend.js";
export type { CudaSimOptions } from "./cuda-sim-options.js";
export { GPU_PROFILES, gpuPeakFlops, gpuProfileForName, type GpuProfile } from "./gpu-peaks.js";
export { findSharedLibrary } from "./shared-library.js";
export {
  ncclLibraryStatus,
  ncclUniqueId,
  openNcclCollectives,
  type NcclCollectives,
  type NcclCollectivesOptions,
  type NcclLibraryStatus,
} from "./nccl.js";
