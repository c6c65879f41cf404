export { cudaStatus, type CudaStatus } from "./cuda-status.js";
export { createCudaBackend, type CudaBackendOptions } from "./create-cuda-backend.js";
export { findSharedLibrary } from "./shared-library.js";
