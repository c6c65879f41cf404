import os from "node:os";
import type { FloatDType } from "@kiln/contract";

/** A device kiln can plan for: usable memory and dense peak FLOP/s per dtype. */
export interface DeviceProfile {
  name: string;
  memoryBytes: number;
  peakFlops: { f32: number; bf16: number; f16: number };
}

const GiB = 2 ** 30;

// The GPU table lives with the CUDA backend (one source for MFU and estimates); the
// package is optional, and without it kiln plans for the CPU only.
const cuda = await import("@kiln/kernels-cuda").catch(() => undefined);
const GPUS: Record<string, DeviceProfile> = Object.fromEntries(
  Object.entries(cuda?.GPU_PROFILES ?? {}).map(([key, p]) => [
    key,
    { name: p.name, memoryBytes: p.memoryBytes, peakFlops: { f32: p.peakFlops.f32 ?? 0, bf16: p.peakFlops.bf16 ?? 0, f16: p.peakFlops.f16 ?? 0 } },
  ]),
);

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

/**
 * What `--dtype auto` trains in on a planned device, as on an open backend: bf16 where
 * the device has a bf16 peak (the CPU; GPUs of compute capability 8.0 and later), else
 * f16 with loss scaling where it has an f16 peak, else f32.
 */
export function autoDTypeFor(device: DeviceProfile): FloatDType {
  return device.peakFlops.bf16 > 0 ? "bf16" : device.peakFlops.f16 > 0 ? "f16" : "f32";
}

export function deviceProfile(name: string): DeviceProfile | undefined {
  return name === "cpu" ? cpuProfile() : GPUS[name.toLowerCase()];
}
