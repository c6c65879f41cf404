import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileWriteError, writeFileAtomicallySync } from "@kiln/core";
import type { SimdVariant } from "@kiln/kernels-wasm";
import { kilnCacheDir } from "../cache-dir.js";

/** One measured CPU peak, as stored. */
export interface CachedPeak {
  flopsPerSecond: number;
  /** ISO time of the measurement. */
  measuredAt: string;
  cpu: string;
  simd: string;
  threads: number;
}

interface CacheFile {
  version: 1;
  /** By peakKey(). */
  peaks: Record<string, CachedPeak>;
}

/** Where measured CPU peaks are kept: <kiln cache>/cpu-peak.json. */
export function peakCacheFile(): string {
  return path.join(kilnCacheDir(), "cpu-peak.json");
}

export function cpuModel(): string {
  return os.cpus()[0]?.model.trim() || "unknown CPU";
}

/**
 * What a peak depends on: the machine (a cache folder may be shared between hosts),
 * the CPU, the SIMD variant and thread count the kernels run with, and V8 (which
 * compiles the kernels).
 */
export function peakKey(simd: string, threads: number): string {
  return `${os.hostname()} | ${cpuModel()} | ${simd} | ${threads} threads | v8 ${process.versions.v8}`;
}

function readCache(file: string): CacheFile {
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<CacheFile>;
    if (parsed.version === 1 && parsed.peaks && typeof parsed.peaks === "object") return { version: 1, peaks: parsed.peaks };
  } catch {
    // Missing or unreadable: measured again and rewritten.
  }
  return { version: 1, peaks: {} };
}

export function readCachedPeak(file: string, key: string): CachedPeak | undefined {
  const entry = readCache(file).peaks[key];
  return entry && Number.isFinite(entry.flopsPerSecond) && entry.flopsPerSecond > 0 ? entry : undefined;
}

/**
 * Stores (or with `undefined`, forgets) the peak under `key`, keeping the others; written
 * atomically, so a reader never sees half a file. Two processes writing at once may drop
 * each other's new entry: that peak is then measured again, nothing worse. Failures are
 * KilnErrors saying why.
 */
export function writeCachedPeak(file: string, key: string, entry: CachedPeak | undefined): void {
  const cache = readCache(file);
  if (entry) cache.peaks[key] = entry;
  else delete cache.peaks[key];
  const what = "the CPU peak cache";
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
  } catch (err) {
    throw fileWriteError(err, path.dirname(file), { what, doing: "create the cache folder" });
  }
  writeFileAtomicallySync(file, `${JSON.stringify(cache, null, 2)}\n`, { what });
}

/** The fastest peak cached for this machine, CPU and V8 at `threads` threads, whichever SIMD variant or native instruction set. */
export function bestCachedPeak(threads: number, file = peakCacheFile()): CachedPeak | undefined {
  const keys = [...(["relaxed", "plain"] satisfies SimdVariant[]), "native avx512", "native avx2", "native neon"].map((simd) => peakKey(simd, threads));
  const peaks = Object.entries(readCache(file).peaks)
    .filter(([key, p]) => keys.includes(key) && Number.isFinite(p.flopsPerSecond) && p.flopsPerSecond > 0)
    .map(([, p]) => p);
  return peaks.sort((a, b) => b.flopsPerSecond - a.flopsPerSecond)[0];
}
