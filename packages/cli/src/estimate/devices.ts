import os from "node:os";

/** A device kiln can plan for: usable memory and dense peak FLOP/s per dtype. */
export interface DeviceProfile {
  name: string;
  memoryBytes: number;
  peakFlops: { f32: number; bf16: number; f16: number };
}

const GiB = 2 ** 30;
const T = 1e12;

/** Published memory sizes and dense (non-sparse) tensor-core peaks. */
const GPUS: Record<string, DeviceProfile> = {
  h100: { name: "NVIDIA H100 SXM 80GB", memoryBytes: 80 * GiB, peakFlops: { f32: 67 * T, bf16: 989 * T, f16: 989 * T } },
  h200: { name: "NVIDIA H200 141GB", memoryBytes: 141e9, peakFlops: { f32: 67 * T, bf16: 989 * T, f16: 989 * T } },
  "a100-40": { name: "NVIDIA A100 40GB", memoryBytes: 40 * GiB, peakFlops: { f32: 19.5 * T, bf16: 312 * T, f16: 312 * T } },
  "a100-80": { name: "NVIDIA A100 80GB", memoryBytes: 80 * GiB, peakFlops: { f32: 19.5 * T, bf16: 312 * T, f16: 312 * T } },
  l4: { name: "NVIDIA L4 24GB", memoryBytes: 24 * GiB, peakFlops: { f32: 30 * T, bf16: 121 * T, f16: 121 * T } },
  rtx4090: { name: "NVIDIA GeForce RTX 4090 24GB", memoryBytes: 24 * GiB, peakFlops: { f32: 82.6 * T, bf16: 165 * T, f16: 165 * T } },
};

/** WebAssembly's 32-bit address space caps the CPU backend at 4 GiB, whatever the RAM. */
export const WASM32_LIMIT = 4 * GiB;

export function cpuProfile(): DeviceProfile {
  return {
    name: `this CPU (${os.availableParallelism()} cores, WebAssembly: at most 4 GiB)`,
    memoryBytes: Math.min(os.totalmem(), WASM32_LIMIT),
    // Measured on 2 cores of the CI machines: about 40 GFLOP/s per core with relaxed SIMD.
    peakFlops: { f32: 40e9 * os.availableParallelism(), bf16: 40e9 * os.availableParallelism(), f16: 40e9 * os.availableParallelism() },
  };
}

export const KNOWN_DEVICES = ["cpu", ...Object.keys(GPUS)];

export function deviceProfile(name: string): DeviceProfile | undefined {
  return name === "cpu" ? cpuProfile() : GPUS[name.toLowerCase()];
}
