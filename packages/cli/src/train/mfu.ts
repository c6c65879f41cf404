import type { Capabilities, FloatDType } from "@kiln/contract";

/** Model FLOPs utilisation over one logging window, and whether the peak it used was too low. */
export interface Utilization {
  /** Model FLOPs / (seconds x peak), at most 1; null when the device's peak for the dtype is unknown. */
  mfu: number | null;
  /** The window ran faster than the peak: the peak figure is wrong (measured on a busy machine). */
  beatPeak: boolean;
}

/**
 * MFU = model FLOPs done / (seconds x the device's peak FLOP/s for the dtype trained in).
 * Model FLOPs are the training FLOPs of the tokens processed (6N per token plus attention),
 * not the FLOPs the kernels ran (recomputation is not counted), so a correct peak keeps it
 * at or below 1; a value above 1 is reported as 1 with `beatPeak` set.
 */
export function modelFlopsUtilization(modelFlops: number, seconds: number, peakFlopsPerSecond: number | undefined): Utilization {
  if (peakFlopsPerSecond === undefined || !(peakFlopsPerSecond > 0) || !(seconds > 0)) return { mfu: null, beatPeak: false };
  const mfu = modelFlops / (seconds * peakFlopsPerSecond);
  return { mfu: Math.min(1, Math.max(0, mfu)), beatPeak: mfu > 1 };
}

/**
 * The peak MFU is measured against: the device's figure for the dtype trained in. The
 * CPU kernels compute in f32 whatever the storage dtype, so a CPU uses its f32 peak.
 */
export function peakForDtype(caps: Capabilities, dtype: FloatDType): number | undefined {
  return caps.peakFlops[dtype] ?? (caps.device.kind === "cpu" ? caps.peakFlops.f32 : undefined);
}
