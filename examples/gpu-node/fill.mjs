// @kiln/kernels-cuda in a plain Node script: fill a buffer on GPU 0 and read it back, or
// say why this machine cannot. `node fill.mjs --sim` runs the same kernels on the CPU
// through the CUDA simulator instead (when it is built).
import { createCudaBackend, createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";

const status = cudaStatus();
let outcome;
try {
  const gpu = process.argv.includes("--sim") ? createCudaSimBackend() : createCudaBackend({ device: 0 });
  const buffer = gpu.alloc(4 * 4);
  gpu.kernels.fill({ out: buffer, n: 4, value: 1.5, dtype: "f32" });
  const values = new Float32Array(4);
  await gpu.download(buffer, values);
  outcome = { device: gpu.capabilities().device.name, values: Array.from(values) };
  gpu.dispose();
} catch (error) {
  // kiln's errors say what to do in `hint`.
  outcome = { device: null, why: error.message, hint: error.hint };
}
console.log(JSON.stringify({ driver: status.driver.detail, addon: status.addon.detail, ...outcome }));
