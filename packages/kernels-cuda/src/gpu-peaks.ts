import type { FloatDType } from "@kiln/contract";

/** A GPU model: usable memory, its bandwidth, and dense (non-sparse) peak FLOP/s per dtype. */
export interface GpuProfile {
  name: string;
  memoryBytes: number;
  /** Peak device-memory bandwidth, bytes per second (the published figure). */
  memoryBandwidth: number;
  /** f32: CUDA cores (no TF32); bf16/f16: tensor cores with f32 accumulation. Absent: no such tensor-core path. */
  peakFlops: Partial<Record<FloatDType, number>>;
  /** Matches the name the driver reports (cudaGetDeviceProperties). */
  match: RegExp;
  /** Set when kiln's CUDA kernels cannot run on this GPU (CMakeLists.txt builds for sm_80 and newer): why. It can still be planned for. */
  unsupported?: string;
}

const GiB = 2 ** 30;
const T = 1e12;
const TB = 1e12;
const peaks = (f32: number, half: number | undefined, bf16 = half) => ({ f32: f32 * T, ...(half ? { f16: half * T } : {}), ...(bf16 ? { bf16: bf16 * T } : {}) });

/**
 * Published figures, keyed by the short names `kiln estimate --device` takes. One
 * source for MFU (the CUDA backend's capabilities) and for `kiln estimate`. Order
 * matters for matching: the first entry whose pattern matches the reported name wins.
 */
export const GPU_PROFILES: Record<string, GpuProfile> = {
  "h100-pcie": { name: "NVIDIA H100 PCIe 80GB", memoryBytes: 80 * GiB, memoryBandwidth: 2.0 * TB, peakFlops: peaks(51, 756), match: /H100.*PCIe/i },
  "h100-nvl": { name: "NVIDIA H100 NVL 94GB", memoryBytes: 94 * GiB, memoryBandwidth: 3.9 * TB, peakFlops: peaks(60, 835), match: /H100.*NVL/i },
  h100: { name: "NVIDIA H100 SXM 80GB", memoryBytes: 80 * GiB, memoryBandwidth: 3.35 * TB, peakFlops: peaks(67, 989), match: /H100/i },
  h200: { name: "NVIDIA H200 141GB", memoryBytes: 141e9, memoryBandwidth: 4.8 * TB, peakFlops: peaks(67, 989), match: /H200/i },
  b200: { name: "NVIDIA B200 180GB", memoryBytes: 180 * GiB, memoryBandwidth: 8.0 * TB, peakFlops: peaks(80, 2250), match: /B200/i },
  "a100-40": { name: "NVIDIA A100 40GB", memoryBytes: 40 * GiB, memoryBandwidth: 1.555 * TB, peakFlops: peaks(19.5, 312), match: /A100.*40GB/i },
  "a100-80": { name: "NVIDIA A100 80GB", memoryBytes: 80 * GiB, memoryBandwidth: 2.039 * TB, peakFlops: peaks(19.5, 312), match: /A100/i },
  a30: { name: "NVIDIA A30 24GB", memoryBytes: 24 * GiB, memoryBandwidth: 0.933 * TB, peakFlops: peaks(10.3, 165), match: /\bA30\b/i },
  a10: { name: "NVIDIA A10 24GB", memoryBytes: 24 * GiB, memoryBandwidth: 0.6 * TB, peakFlops: peaks(31.2, 125), match: /\bA10\b/i },
  l40s: { name: "NVIDIA L40S 48GB", memoryBytes: 48 * GiB, memoryBandwidth: 0.864 * TB, peakFlops: peaks(91.6, 362), match: /L40S/i },
  l4: { name: "NVIDIA L4 24GB", memoryBytes: 24 * GiB, memoryBandwidth: 0.3 * TB, peakFlops: peaks(30.3, 121), match: /\bL4\b/i },
  rtx3090: { name: "NVIDIA GeForce RTX 3090 24GB", memoryBytes: 24 * GiB, memoryBandwidth: 0.936 * TB, peakFlops: peaks(35.6, 71), match: /RTX 3090/i },
  rtx4090: { name: "NVIDIA GeForce RTX 4090 24GB", memoryBytes: 24 * GiB, memoryBandwidth: 1.008 * TB, peakFlops: peaks(82.6, 165.2), match: /RTX 4090/i },
  rtx5090: { name: "NVIDIA GeForce RTX 5090 32GB", memoryBytes: 32 * GiB, memoryBandwidth: 1.792 * TB, peakFlops: peaks(104.8, 209.5), match: /RTX 5090/i },
  // No bf16 before Ampere: f16 tensor cores only.
  v100: { name: "NVIDIA V100 SXM2 32GB", memoryBytes: 32 * GiB, memoryBandwidth: 0.9 * TB, peakFlops: { f32: 15.7 * T, f16: 125 * T }, match: /V100/i, unsupported: "Volta (sm_70); kiln's CUDA kernels are built for sm_80 and newer" },
  t4: { name: "NVIDIA T4 16GB", memoryBytes: 15 * GiB, memoryBandwidth: 0.32 * TB, peakFlops: { f32: 8.1 * T, f16: 65 * T }, match: /\bT4\b/i, unsupported: "Turing (sm_75); kiln's CUDA kernels are built for sm_80 and newer" },
};

/** The profile of the GPU the driver names `deviceName`, if kiln knows it. */
export function gpuProfileForName(deviceName: string): GpuProfile | undefined {
  return Object.values(GPU_PROFILES).find((p) => p.match.test(deviceName));
}

/** Peak FLOP/s per dtype of the GPU named `deviceName` (for MFU); undefined when unknown. */
export function gpuPeakFlops(deviceName: string): GpuProfile["peakFlops"] | undefined {
  return gpuProfileForName(deviceName)?.peakFlops;
}
