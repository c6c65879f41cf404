import { type Backend, DeviceError, createReferenceBackend } from "@kiln/contract";
import type { PeakFlopsSource } from "@kiln/kernels-wasm";
import type { TargetDevice } from "@kiln/core";

export interface BackendOptions {
  /** CPU threads for the wasm kernels (default: every core). */
  threads?: number;
  /** Where the CPU backend's peak FLOP/s comes from (for MFU); without it the CPU backend has none. */
  cpuPeak?: PeakFlopsSource;
  /** Allow TF32 matmuls (--tf32, trainer.tf32): the CUDA backend's f32 matmuls through cuBLASLt use it; elsewhere it has no effect. */
  tf32?: boolean;
  /** The GPU's ordinal among the visible ones (default 0); a data-parallel rank's own GPU. */
  device?: number;
  /** When the config file (not --target-device) asked for the GPU: its line, which a refusal names instead of the flag. */
  targetFrom?: { where: string; file: string };
}

/** Backends by registry name; KILN_BACKEND picks one of them over --target-device. */
const BACKENDS: Record<string, (options: BackendOptions) => Promise<Backend>> = {
  cpu: async (options) =>
    (await import("@kiln/kernels-wasm")).createWasmBackend({
      ...(options.threads ? { threads: options.threads } : {}),
      ...(options.cpuPeak ? { peakFlops: options.cpuPeak } : { measurePeak: false }),
    }),
  gpu: async (options) => {
    const cuda = await importCuda("--target-device gpu");
    return cuda.createCudaBackend({ ...(options.tf32 ? { tf32: true } : {}), ...(options.device !== undefined ? { device: options.device } : {}) });
  },
  // The CUDA kernels compiled for the host CPU: slow, for checking the GPU code without a GPU.
  "cuda-sim": async () => (await importCuda("KILN_BACKEND=cuda-sim")).createCudaSimBackend(),
  // Every kernel through the contract's f64 oracle: slow, for checking kiln itself.
  reference: async () => createReferenceBackend(),
};

export async function importCuda(where: string): Promise<typeof import("@kiln/kernels-cuda")> {
  try {
    return await import("@kiln/kernels-cuda");
  } catch {
    throw new DeviceError("the GPU backend (@kiln/kernels-cuda) is not installed", {
      where,
      hint: "install @kiln/kernels-cuda on a machine with CUDA, or train on the CPU with --target-device cpu",
    });
  }
}

/** Why "auto" did not pick the GPU, or undefined when it did (a GPU is usable). */
export async function gpuUnavailableReason(): Promise<string | undefined> {
  let cuda: typeof import("@kiln/kernels-cuda");
  try {
    cuda = await import("@kiln/kernels-cuda");
  } catch {
    return "@kiln/kernels-cuda is not installed";
  }
  const st = cuda.cudaStatus();
  if (!st.addon.built) return `the CUDA kernels are not built (${st.addon.detail})`;
  if (st.runtime.deviceCount === 0) return st.runtime.error || st.driver.detail;
  return undefined;
}

/**
 * The backend for a target device: "cpu" -> @kiln/kernels-wasm, "gpu" -> @kiln/kernels-cuda
 * (optional: a clear DeviceError when it is not installed or cannot run here), "auto" -> the
 * GPU when usable, else the CPU with the reason in `note`. KILN_BACKEND (cpu, gpu, cuda-sim,
 * reference) overrides the choice.
 */
export async function openBackend(device: TargetDevice, options: BackendOptions = {}): Promise<{ backend: Backend; note?: string }> {
  const forced = process.env.KILN_BACKEND;
  if (forced) {
    const open = BACKENDS[forced];
    if (!open) {
      throw new DeviceError(`KILN_BACKEND=${forced} is not a backend`, { where: "KILN_BACKEND", hint: `use one of ${Object.keys(BACKENDS).join(", ")}, or unset it` });
    }
    return { backend: await open(options) };
  }
  if (device === "gpu" && options.targetFrom) return { backend: await openGpuFromFile(options, options.targetFrom) };
  if (device !== "auto") return { backend: await BACKENDS[device](options) };
  const why = await gpuUnavailableReason();
  if (why === undefined) return { backend: await BACKENDS.gpu(options) };
  return { backend: await BACKENDS.cpu(options), note: `training on the CPU: no usable GPU (${why})` };
}

/** The GPU that the config's trainer.target_device asked for; a refusal names that line and the ways on. */
async function openGpuFromFile(options: BackendOptions, from: { where: string; file: string }): Promise<Backend> {
  try {
    return await BACKENDS.gpu(options);
  } catch (err) {
    if (!(err instanceof DeviceError)) throw err;
    const line = from.where.slice(from.where.lastIndexOf(":") + 1);
    throw new DeviceError(`trainer.target_device (line ${line}) is gpu, but ${err.message.replace(/^cannot/, "kiln cannot")}`, {
      where: from.where,
      hint: `set trainer.target_device to auto or cpu in ${from.file}, or pass --target-device cpu${err.hint ? `; ${err.hint.replace(/[,.;]?\s*or train on the CPU with --target-device cpu\.?$/, "")}` : ""}`,
      cause: err,
    });
  }
}

/** Whether a run with this target device trains on a CUDA backend (the GPU, or the CUDA simulator through KILN_BACKEND). */
export async function trainsOnCuda(device: TargetDevice): Promise<boolean> {
  const forced = process.env.KILN_BACKEND;
  if (forced) return forced === "gpu" || forced === "cuda-sim";
  if (device === "auto") return (await gpuUnavailableReason()) === undefined;
  return device === "gpu";
}
