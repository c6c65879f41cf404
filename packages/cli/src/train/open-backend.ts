import { type Backend, DeviceError, createReferenceBackend } from "@kiln/contract";

/**
 * The backend for a device name: "cpu" -> @kiln/kernels-wasm, "gpu" -> @kiln/kernels-cuda
 * (optional: a clear DeviceError when it is not installed or cannot run here).
 */
export async function openBackend(device: "cpu" | "gpu", options: { threads?: number } = {}): Promise<Backend> {
  // KILN_BACKEND=reference runs every kernel through the contract's f64 oracle: slow, for checking kiln itself.
  if (process.env.KILN_BACKEND === "reference") return createReferenceBackend();
  if (device === "cpu") {
    const wasm = await import("@kiln/kernels-wasm");
    return wasm.createWasmBackend({ ...(options.threads ? { threads: options.threads } : {}) });
  }
  let cuda: typeof import("@kiln/kernels-cuda");
  try {
    cuda = await import("@kiln/kernels-cuda");
  } catch {
    throw new DeviceError("the GPU backend (@kiln/kernels-cuda) is not installed", {
      where: "--target-device gpu",
      hint: "install @kiln/kernels-cuda on a machine with CUDA, or train on the CPU with --target-device cpu",
    });
  }
  return cuda.createCudaBackend();
}
