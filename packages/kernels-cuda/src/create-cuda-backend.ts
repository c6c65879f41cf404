import { type Backend, DeviceError } from "@kiln/contract";
import { type OpenDeviceOptions, openNativeBackend } from "./cuda-backend.js";
import type { CudaSimOptions } from "./cuda-sim-options.js";
import { cudaStatus } from "./cuda-status.js";
import { loadAddon } from "./native-addon.js";

export interface CudaBackendOptions {
  /** Device ordinal among the visible devices (default 0; CUDA_VISIBLE_DEVICES applies). */
  device?: number;
  /** Let f32 matmuls round their inputs to TF32 on tensor cores (cuBLASLt only). */
  tf32?: boolean;
}

/**
 * Which matmul runs: KILN_MATMUL_PATH=cublaslt (required), kiln (kiln's kernels:
 * tensor cores for bf16/f16, Hopper's wgmma kernel on sm_90 and the pipelined mma.sync
 * kernel elsewhere; SIMT for f32), wgmma (the wgmma kernel: sm_90 only, or the
 * simulator), mma (the mma.sync kernel, on sm_90 too), wmma (the WMMA kernel for
 * bf16/f16), simt (SIMT for every dtype); unset: cuBLASLt when a libcublasLt.so is
 * found, else kiln's kernels.
 */
const KILN_MATMUL_PATHS = ["kiln", "wgmma", "mma", "wmma", "simt"];

function cublasLtChoice(found: string | null, tf32: boolean): OpenDeviceOptions["cublasLt"] {
  const wanted = process.env.KILN_MATMUL_PATH ?? "";
  if (!["", "cublaslt", ...KILN_MATMUL_PATHS].includes(wanted)) {
    throw new DeviceError(`KILN_MATMUL_PATH=${wanted} is not a matmul path`, { where: "KILN_MATMUL_PATH", hint: "use cublaslt, kiln, wgmma, mma, wmma or simt, or unset it" });
  }
  if (KILN_MATMUL_PATHS.includes(wanted)) return undefined;
  if (!found) {
    if (wanted === "cublaslt") {
      throw new DeviceError("KILN_MATMUL_PATH=cublaslt but no libcublasLt.so was found", {
        where: "KILN_MATMUL_PATH",
        hint: "install cuBLAS 12 or 13 (the CUDA toolkit's libcublasLt, or pip's nvidia-cublas) where the loader finds it (LD_LIBRARY_PATH), or unset KILN_MATMUL_PATH",
      });
    }
    return undefined;
  }
  return { path: found, tf32, required: wanted === "cublaslt" };
}

/**
 * The kernel settings the addon reads from the environment when a device opens, each
 * with the values it takes ("" = unset) and what it is: the pipelined bf16/f16 matmuls'
 * block tile (KILN_MATMUL_TILES: large or small for every call; unset, the larger where
 * it makes at least 128 tiles), which bf16/f16 attention kernels run (KILN_ATTENTION_PATH:
 * wgmma, Hopper's warpgroup instruction, the default on sm_90 and refused by the addon on
 * other devices; mma, the default elsewhere, with scores and probabilities in registers;
 * wmma; simt on CUDA cores), the wgmma attention's rows a block (64, one warpgroup, or
 * 128, two sharing each loop tile), the mma.sync backward's dQ (from the dS its dK/dV
 * pass stored, the default, or recomputed) and the mma.sync forward's keys a loop tile
 * at heads up to 64 (64, the default, or 32).
 */
const KERNEL_SETTINGS = [
  { variable: "KILN_MATMUL_TILES", values: ["large", "small"], what: "a block tile of the pipelined matmuls", use: "large or small" },
  { variable: "KILN_ATTENTION_PATH", values: ["mma", "wgmma", "wmma", "simt"], what: "an attention path", use: "mma, wgmma (sm_90), wmma or simt" },
  { variable: "KILN_ATTENTION_WGMMA_ROWS", values: ["64", "128"], what: "a block size of the wgmma attention", use: "64 or 128" },
  { variable: "KILN_ATTENTION_DQ", values: ["recompute", "stored-ds"], what: "a way of the attention backward's dQ", use: "recompute or stored-ds" },
  { variable: "KILN_ATTENTION_MMA_KEYS", values: ["32", "64"], what: "a key tile of the mma.sync attention forward", use: "32 or 64" },
] as const;

/** Refuses, before the addon reads them, kernel settings it does not take, naming the variable and its values. */
function checkKernelSettings(): void {
  for (const { variable, values, what, use } of KERNEL_SETTINGS) {
    const wanted = process.env[variable] ?? "";
    if (wanted !== "" && !(values as readonly string[]).includes(wanted)) {
      throw new DeviceError(`${variable}=${wanted} is not ${what}`, { where: variable, hint: `use ${use}, or unset it` });
    }
  }
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
  checkKernelSettings();
  const cublasLt = cublasLtChoice(status.libraries.cublasLt, options.tf32 ?? false);
  const { addon } = loadAddon("cuda");
  return openNativeBackend(addon!, { device, name: "cuda", kind: "cuda", ...(cublasLt ? { cublasLt } : {}) });
}

/**
 * The CUDA kernels compiled for the host CPU (csrc/sim): the same sources, run one
 * block at a time with every thread a fiber. For correctness tests only: slow.
 */
export function createCudaSimBackend(options: CudaSimOptions = {}): Backend {
  const { addon, reason } = loadAddon("sim");
  if (!addon) {
    throw new DeviceError(`cannot use the CUDA simulator: ${reason}`, {
      where: "KILN_BACKEND=cuda-sim",
      hint: "build it with 'pnpm --filter @kiln/kernels-cuda build' on a machine with clang++-16 and the CUDA headers",
    });
  }
  checkKernelSettings();
  const sim: Required<CudaSimOptions> = {
    reverseBlocks: options.reverseBlocks ?? false,
    reverseThreads: options.reverseThreads ?? false,
    warpsInTurn: options.warpsInTurn ?? false,
    maxGridY: options.maxGridY ?? 65535,
  };
  addon.setSimOptions?.(sim);  // refuses a maxGridY out of range before the device opens
  return openNativeBackend(addon, { device: 0, name: "cuda-sim", kind: "sim", beforeLaunch: () => addon.setSimOptions?.(sim) });
}
