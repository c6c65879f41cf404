import os from "node:os";
import type { CudaStatus } from "@kiln/kernels-cuda";
import { createKernels } from "@kiln/kernels-wasm";
import { type AddonStatus, glooStatus, sharedMemoryStatus } from "@kiln/distributed";
import { cpuPeak } from "../cpu-peak/cpu-peak.js";

/** The CPU's f32 peak FLOP/s that kiln train's MFU is measured against (all threads). */
export interface CpuPeakReport {
  flopsPerSecond: number;
  measuredAt: string;
  /** False when doctor measured it just now. */
  cached: boolean;
  file: string;
}

/** Everything `kiln doctor` reports, as data (printed as text or JSON). */
export interface DoctorReport {
  node: { version: string; platform: string; arch: string };
  cpu: { model: string; cores: number; memoryBytes: number };
  wasm:
    | { ok: true; simd: string; threads: number; sharedMemory: boolean; note?: string; native: { kernels: readonly string[]; isa?: string; reason?: string }; peak: CpuPeakReport }
    | { ok: false; error: string };
  /** Absent when @kiln/kernels-cuda is not installed. */
  cuda: CudaStatus | { missing: string };
  /** Data-parallel gradient sync: `cpu` needs nothing (its shared-memory path the shm addon); `gloo` the Gloo addon of @kiln/distributed. */
  sync: { sharedMemory: AddonStatus; gloo: AddonStatus };
}

export async function gatherDoctorReport(): Promise<DoctorReport> {
  const cpus = os.cpus();
  return {
    node: { version: process.version, platform: process.platform, arch: process.arch },
    cpu: { model: cpus[0]?.model.trim() ?? "unknown", cores: os.availableParallelism(), memoryBytes: os.totalmem() },
    wasm: await probeWasm(),
    cuda: await probeCuda(),
    sync: { sharedMemory: sharedMemoryStatus(), gloo: glooStatus() },
  };
}

async function probeWasm(): Promise<DoctorReport["wasm"]> {
  try {
    // As kiln train opens them: the matmul natively where the addon runs, its peak the native FMA loop's.
    const kernels = await createKernels({ native: true });
    try {
      const info = kernels.info;
      const native = info.native.kernels.length > 0;
      const ceiling = (iterations: number) => (native ? kernels.measureNativeCeiling(iterations) : kernels.measureCeiling(iterations));
      const peak = cpuPeak(info, ceiling, (text) => process.stderr.write(`${text}\n`));
      return {
        ok: true,
        simd: info.simd === "relaxed" ? "relaxed SIMD (fused multiply-add)" : "SIMD128",
        threads: info.threads,
        sharedMemory: info.sharedMemory,
        native: info.native,
        ...(info.threadLimitReason ? { note: info.threadLimitReason } : {}),
        peak: { flopsPerSecond: peak.flopsPerSecond, measuredAt: peak.measuredAt, cached: peak.cached, file: peak.file },
      };
    } finally {
      kernels.dispose();
    }
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/** @kiln/kernels-cuda is optional: kiln installs and runs without it. */
async function probeCuda(): Promise<DoctorReport["cuda"]> {
  try {
    const cuda = await import("@kiln/kernels-cuda");
    return cuda.cudaStatus();
  } catch (err) {
    return { missing: `@kiln/kernels-cuda is not installed (${err instanceof Error ? err.message.split("\n")[0] : String(err)})` };
  }
}
