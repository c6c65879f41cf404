import { type Backend, DeviceError } from "@kiln/contract";
import { cudaStatus } from "./cuda-status.js";

export interface CudaBackendOptions {
  /** CUDA device ordinal (default 0). */
  device?: number;
}

/**
 * The GPU backend. Throws a DeviceError that says exactly what is missing when
 * this machine or this build cannot provide it.
 */
export function createCudaBackend(_options: CudaBackendOptions = {}): Backend {
  const status = cudaStatus();
  if (!status.driver.found) {
    throw new DeviceError(`cannot use the GPU: ${status.driver.detail}`, {
      where: "--target-device gpu",
      hint: "install the NVIDIA driver on a machine with an NVIDIA GPU, or train on the CPU with --target-device cpu",
    });
  }
  throw new DeviceError(`cannot use the GPU: ${status.addon.detail}`, {
    where: "@kiln/kernels-cuda",
    hint: "train on the CPU with --target-device cpu; the CUDA kernels ship in a later release",
  });
}
