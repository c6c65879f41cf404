import os from "node:os";
import { ConfigError, type FloatDType } from "@kiln/contract";
import { bestCachedPeak } from "../cpu-peak/peak-cache.js";
import { gpuUnavailableReason } from "../train/open-backend.js";

/** A device kiln can plan for: usable memory and dense peak FLOP/s per dtype (0: unknown, or no such path). */
export interface DeviceProfile {
  name: string;
  memoryBytes: number;
  peakFlops: { f32: number; bf16: number; f16: number };
  /** Peak memory bandwidth in bytes per second, where kiln knows it (the GPU table). */
  memoryBandwidth?: number;
  /** Set when kiln can plan for the device but its kernels do not run there: why. */
  unsupported?: string;
  /** The CPU: the threads kiln train's kernels run on (every core); its memory is the host's. */
  threads?: number;
}

const GiB = 2 ** 30;

// The GPU table lives with the CUDA backend (one source for MFU and estimates); the
// package is optional, and without it kiln plans for the CPU only.
const cuda = await import("@kiln/kernels-cuda").catch(() => undefined);
const GPUS: Record<string, DeviceProfile> = Object.fromEntries(
  Object.entries(cuda?.GPU_PROFILES ?? {}).map(([key, p]) => [
    key,
    {
      name: p.name,
      memoryBytes: p.memoryBytes,
      memoryBandwidth: p.memoryBandwidth,
      peakFlops: { f32: p.peakFlops.f32 ?? 0, bf16: p.peakFlops.bf16 ?? 0, f16: p.peakFlops.f16 ?? 0 },
      ...(p.unsupported ? { unsupported: p.unsupported } : {}),
    },
  ]),
);

/** WebAssembly's 32-bit address space caps the CPU backend at 4 GiB, whatever the RAM. */
export const WASM32_LIMIT = 4 * GiB;

export function cpuProfile(): DeviceProfile {
  const cores = os.availableParallelism();
  // The peak kiln train measured on this machine (on every core) when it has; else about
  // 40 GFLOP/s per core (relaxed SIMD on the CI machines). The kernels compute in f32 for every dtype.
  const peak = bestCachedPeak(cores)?.flopsPerSecond ?? 40e9 * cores;
  return {
    name: `this CPU (${cores} cores, WebAssembly: at most 4 GiB)`,
    memoryBytes: Math.min(os.totalmem(), WASM32_LIMIT),
    peakFlops: { f32: peak, bf16: peak, f16: peak },
    threads: cores,
  };
}

/** A device kiln has no figures for, known by its memory only (`--device-memory`). */
export function customDevice(name: string, memoryBytes: number): DeviceProfile {
  return { name, memoryBytes, peakFlops: { f32: 0, bf16: 0, f16: 0 } };
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

/** The memory bandwidth (bytes/s) of a GPU by the name its driver reports, where the GPU table has it. */
export function memoryBandwidthForName(deviceName: string): number | undefined {
  return cuda?.gpuProfileForName(deviceName)?.memoryBandwidth;
}

export function deviceProfile(name: string): DeviceProfile | undefined {
  return name === "cpu" ? cpuProfile() : GPUS[name.toLowerCase()];
}

/** The GPU kiln plans for when a run targets a GPU and this machine has none. */
export const DEFAULT_GPU = "h100";

/** The GPU this machine's CUDA backend opens, as kiln's table knows it (else by what the driver reports), or undefined. */
async function localGpu(): Promise<DeviceProfile | undefined> {
  if (!cuda || (await gpuUnavailableReason()) !== undefined) return undefined;
  const backend = await cuda.createCudaBackend();
  try {
    const caps = backend.capabilities();
    const known = cuda.gpuProfileForName(caps.device.name);
    const key = Object.keys(GPUS).find((k) => GPUS[k].name === known?.name);
    return key ? GPUS[key] : { ...customDevice(caps.device.name, caps.device.memoryBytes), peakFlops: { f32: caps.peakFlops.f32 ?? 0, bf16: caps.peakFlops.bf16 ?? 0, f16: caps.peakFlops.f16 ?? 0 } };
  } finally {
    backend.dispose();
  }
}

/**
 * The device `kiln estimate` plans for, from the run's target device: cpu is this CPU; gpu
 * the GPU here, else DEFAULT_GPU (with a note saying so); auto the GPU here, else this CPU;
 * any other name a device of the GPU table. `--device-memory` replaces its memory; without a
 * device named (`named` false) it plans for a device known by its memory alone.
 */
export async function plannedDevice(target: string, memoryBytes: number | undefined, flag: string, named = true): Promise<DeviceProfile & { note?: string }> {
  if (!named && memoryBytes !== undefined) return customDevice("a device", memoryBytes);
  let device: (DeviceProfile & { note?: string }) | undefined;
  if (target === "auto") device = (await localGpu()) ?? cpuProfile();
  else if (target === "gpu") device = (await localGpu()) ?? { ...GPUS[DEFAULT_GPU], note: `no usable GPU here, so this plans for the ${GPUS[DEFAULT_GPU].name}; name another with ${flag} (${Object.keys(GPUS).join(", ")})` };
  else device = deviceProfile(target);
  if (device) return memoryBytes === undefined ? device : { ...device, name: `${device.name} (--device-memory)`, memoryBytes };
  if (memoryBytes !== undefined) return customDevice(target, memoryBytes);
  throw new ConfigError(`unknown device "${target}"`, {
    where: flag,
    hint: `use one of ${KNOWN_DEVICES.join(", ")}, gpu (the GPU here) or auto, or give any other device's memory with --device-memory (e.g. --device-memory 24GiB)`,
  });
}
