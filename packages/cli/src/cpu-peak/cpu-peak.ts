import { KilnError } from "@kiln/contract";
import type { CeilingResult, PeakFlopsSource } from "@kiln/kernels-wasm";
import { type CachedPeak, cpuModel, peakCacheFile, peakKey, readCachedPeak, writeCachedPeak } from "./peak-cache.js";
import { measureStablePeak } from "./stable-peak.js";

/** The CPU's f32 peak for one SIMD variant and thread count, and where it came from. */
export interface CpuPeak extends CachedPeak {
  /** True when read from the cache, false when measured just now. */
  cached: boolean;
  file: string;
  key: string;
}

function errorText(err: unknown): string {
  if (err instanceof KilnError) return err.message;
  return (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
}

/**
 * The f32 peak of the kernels with this SIMD variant and thread count: from the cache
 * when this machine has measured it before, else measured now (about a second, see
 * measureStablePeak) and cached. `notice` hears about a measurement or a cache that
 * cannot be written.
 */
export function cpuPeak(info: { simd: string; threads: number; native?: { isa?: string } }, ceiling: (iterations: number) => CeilingResult, notice: (text: string) => void): CpuPeak {
  const file = peakCacheFile();
  // The native matmul's peak is the machine's FMA loop, not the WebAssembly one: a key of its own.
  const simd = info.native?.isa ? `native ${info.native.isa}` : info.simd;
  const key = peakKey(simd, info.threads);
  const hit = readCachedPeak(file, key);
  if (hit) return { ...hit, cached: true, file, key };
  notice(`measuring this CPU's peak FLOP/s once (${info.native?.isa ? `${simd} matmul` : `${simd} SIMD`}, ${info.threads} thread${info.threads === 1 ? "" : "s"}; kept in ${file})`);
  const m = measureStablePeak(ceiling);
  const entry: CachedPeak = { flopsPerSecond: m.flopsPerSecond, measuredAt: new Date().toISOString(), cpu: cpuModel(), simd, threads: info.threads };
  try {
    writeCachedPeak(file, key, entry);
  } catch (err) {
    notice(`warning: could not keep the CPU peak in ${file} (${errorText(err)}); it will be measured again next time`);
  }
  return { ...entry, cached: false, file, key };
}

/** A backend option that takes the CPU peak from cpuPeak(); `onPeak` receives what was used. */
export function cachedCpuPeakSource(notice: (text: string) => void, onPeak: (peak: CpuPeak) => void = () => {}): PeakFlopsSource {
  return (info, ceiling) => {
    const peak = cpuPeak(info, ceiling, notice);
    onPeak(peak);
    return peak.flopsPerSecond;
  };
}

/**
 * Forgets a cached peak that a run has beaten (it was measured while the machine was
 * busy), so the next run measures again.
 */
export function forgetCpuPeak(peak: CpuPeak): void {
  try {
    writeCachedPeak(peak.file, peak.key, undefined);
  } catch {
    // Nothing to do: the next run reads the same figure and beats it again.
  }
}
