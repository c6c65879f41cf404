import { type Backend, DeviceError } from "@kiln/contract";
import { openNativeBackend } from "./cuda-backend.js";
import { cudaStatus } from "./cuda-status.js";
import { loadAddon } from "./native-addon.js";

export interface CudaBackendOptions {
  /** Device ordinal among the visible devices (default 0; CUDA_VISIBLE_DEVICES applies). */
  device?: number;
}

/**
 * The GPU backend. Throws a DeviceError that says exactly what is missing when
 * this machine or this build cannot provide it.
 */
export function createCudaBackend(options: CudaBackendOptions = {}): Backend {
  const device = options.device ?? 0;
  const status = cudaStatus();
  const noGpu = (why: string) =>
    new DeviceError(`cannot use the GPU: ${why}`, {
      where: "--target-device gpu",
      hint: "install the NVIDIA driver on a machine with an NVIDIA GPU, or train on the CPU with --target-device cpu",
    });
  // The driver first: without one, building the kernels would not help.
  if (!status.driver.found) throw noGpu(status.addon.built && status.runtime.error ? status.runtime.error : status.driver.detail);
  if (!status.addon.built) {
    throw new DeviceError(`cannot use the GPU: ${status.addon.detail}`, {
      where: "@kiln/kernels-cuda",
      hint: "build the CUDA kernels on a machine with the CUDA toolkit (nvcc), or train on the CPU with --target-device cpu",
    });
  }
  if (status.runtime.deviceCount === 0) throw noGpu(status.runtime.error || "the CUDA runtime sees no device");
  if (!Number.isInteger(device) || device < 0 || device >= status.runtime.deviceCount) {
    throw new DeviceError(`GPU ${device} does not exist: ${status.runtime.deviceCount} visible`, {
      where: "--gpus",
      hint: `pick a device between 0 and ${status.runtime.deviceCount - 1} (CUDA_VISIBLE_DEVICES narrows what is visible)`,
    });
  }
  const { addon } = loadAddon("cuda");
  return openNativeBackend(addon!, { device, name: "cuda", kind: "cuda" });
}

/**
 * The CUDA kernels compiled for the host CPU (csrc/sim): the same sources, run one
 * block at a time with every thread a fiber. For correctness tests only: slow.
 */
export function createCudaSimBackend(options: { reverseBlocks?: boolean; reverseThreads?: boolean } = {}): Backend {
  const { addon, reason } = loadAddon("sim");
  if (!addon) {
    throw new DeviceError(`cannot use the CUDA simulator: ${reason}`, {
      where: "KILN_BACKEND=cuda-sim",
      hint: "build it with 'pnpm --filter @kiln/kernels-cuda build' on a machine with clang++-16 and the CUDA headers",
    });
  }
  addon.setSimOptions?.({ reverseBlocks: options.reverseBlocks ?? false, reverseThreads: options.reverseThreads ?? false });
  return openNativeBackend(addon, { device: 0, name: "cuda-sim", kind: "sim" });
}
