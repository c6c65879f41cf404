import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { CeilingResult } from "@kiln/kernels-wasm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { cpuPeak, forgetCpuPeak } from "../src/cpu-peak/cpu-peak.js";
import { peakCacheFile, peakKey } from "../src/cpu-peak/peak-cache.js";
import { STABLE_PEAK, measureStablePeak } from "../src/cpu-peak/stable-peak.js";

const FLOPS_PER_ITERATION = 1000;

/** A ceiling kernel whose speed (FLOP/s) for each call comes from `speedOf(call)`: no clock involved. */
function fakeCeiling(speedOf: (call: number, iterations: number) => number) {
  let call = 0;
  const calls: number[] = [];
  const ceiling = (iterations: number): CeilingResult => {
    calls.push(iterations);
    const flops = iterations * FLOPS_PER_ITERATION;
    const speed = speedOf(call++, iterations);
    return { threads: 2, seconds: flops / speed, flops, gflops: speed / 1e9 };
  };
  return { ceiling, calls };
}

describe("measureStablePeak", () => {
  it("warms up before measuring, so a slow baseline tier never becomes the peak", () => {
    // The first 500 calls run at a fifth of the speed (V8's baseline tier).
    const { ceiling, calls } = fakeCeiling((call) => (call < 500 ? 10e9 : 50e9));
    const m = measureStablePeak(ceiling);
    expect(m.flopsPerSecond).toBe(50e9);
    expect(calls.length).toBeGreaterThanOrEqual(STABLE_PEAK.warmupCalls + 1 + STABLE_PEAK.minRounds);
  });

  it("sizes each round to roundSeconds from the probe call", () => {
    const { ceiling } = fakeCeiling(() => 40e9);
    const m = measureStablePeak(ceiling);
    const roundSeconds = m.rounds.map(() => STABLE_PEAK.roundSeconds);
    expect(m.rounds.length).toBe(STABLE_PEAK.minRounds);
    expect(m.seconds).toBeGreaterThan(roundSeconds.reduce((a, b) => a + b, 0) * 0.99);
  });

  it("keeps the fastest round: other work on the machine only slows rounds down", () => {
    const speeds = [30e9, 52e9, 41e9, 51.5e9, 20e9, 45e9];
    const { ceiling } = fakeCeiling((call) => (call <= STABLE_PEAK.warmupCalls ? 52e9 : speeds[(call - STABLE_PEAK.warmupCalls - 1) % speeds.length]));
    const m = measureStablePeak(ceiling);
    expect(m.rounds).toEqual(speeds);
    expect(m.flopsPerSecond).toBe(52e9);
  });

  it("measures more rounds until the two fastest agree within 2%, up to maxRounds", () => {
    // Alternating 40 and 50 GFLOP/s until round 9, which reaches 50.5 (within 2% of 50).
    const speeds = [40e9, 50e9, 40e9, 45e9, 40e9, 44e9, 40e9, 46e9, 50.5e9, 40e9];
    const firstRound = STABLE_PEAK.warmupCalls + 1;
    const agreeing = fakeCeiling((call) => (call < firstRound ? 50e9 : speeds[call - firstRound]));
    // Rounds 1..6: 50 then 46 at best (8% apart) -> keep going; round 9 (50.5) agrees with 50.
    expect(measureStablePeak(agreeing.ceiling).rounds).toEqual(speeds.slice(0, 9));

    // Each round 10% faster than the one before: never two within 2%.
    const noisy = fakeCeiling((call) => (call < firstRound ? 50e9 : 20e9 * 1.1 ** (call - firstRound)));
    expect(measureStablePeak(noisy.ceiling).rounds.length).toBe(STABLE_PEAK.maxRounds);
  });
});

describe("the CPU peak cache", () => {
  let cache: string;
  const saved = process.env.XDG_CACHE_HOME;
  beforeEach(async () => {
    cache = await mkdtemp(path.join(tmpdir(), "kiln-peak-"));
    process.env.XDG_CACHE_HOME = cache;
  });
  afterEach(async () => {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
    await rm(cache, { recursive: true, force: true });
  });

  it("lives under $XDG_CACHE_HOME/kiln", () => {
    expect(peakCacheFile()).toBe(path.join(cache, "kiln", "cpu-peak.json"));
  });

  it("measures once per SIMD variant and thread count, then reads the figure back", async () => {
    const notices: string[] = [];
    const first = fakeCeiling(() => 60e9);
    const a = cpuPeak({ simd: "relaxed", threads: 2 }, first.ceiling, (t) => notices.push(t));
    expect(a).toMatchObject({ flopsPerSecond: 60e9, cached: false, simd: "relaxed", threads: 2 });
    expect(notices).toEqual([expect.stringMatching(/^measuring this CPU's peak FLOP\/s once \(relaxed SIMD, 2 threads; kept in .*cpu-peak\.json\)$/)]);

    // The same variant again: no measurement (a ceiling that would give another figure is never called).
    const second = fakeCeiling(() => 10e9);
    const b = cpuPeak({ simd: "relaxed", threads: 2 }, second.ceiling, (t) => notices.push(t));
    expect(b).toMatchObject({ flopsPerSecond: 60e9, cached: true });
    expect(second.calls).toEqual([]);

    // Another thread count or SIMD variant is a different peak.
    expect(cpuPeak({ simd: "relaxed", threads: 1 }, fakeCeiling(() => 31e9).ceiling, () => {}).flopsPerSecond).toBe(31e9);
    expect(cpuPeak({ simd: "plain", threads: 2 }, fakeCeiling(() => 44e9).ceiling, () => {}).flopsPerSecond).toBe(44e9);
    const stored = JSON.parse(await readFile(peakCacheFile(), "utf8")) as { peaks: Record<string, { flopsPerSecond: number }> };
    expect(Object.keys(stored.peaks).sort()).toEqual([peakKey("relaxed", 1), peakKey("relaxed", 2), peakKey("plain", 2)].sort());
  });

  it("measures again after a run beat the cached figure", () => {
    const low = cpuPeak({ simd: "relaxed", threads: 2 }, fakeCeiling(() => 20e9).ceiling, () => {});
    forgetCpuPeak(low);
    const again = cpuPeak({ simd: "relaxed", threads: 2 }, fakeCeiling(() => 60e9).ceiling, () => {});
    expect(again).toMatchObject({ flopsPerSecond: 60e9, cached: false });
  });

  it("keeps working when the cache cannot be written, and says so", async () => {
    process.env.XDG_CACHE_HOME = path.join(cache, "file");
    await import("node:fs/promises").then((fs) => fs.writeFile(path.join(cache, "file"), "not a folder"));
    const notices: string[] = [];
    const p = cpuPeak({ simd: "relaxed", threads: 2 }, fakeCeiling(() => 60e9).ceiling, (t) => notices.push(t));
    expect(p.flopsPerSecond).toBe(60e9);
    expect(notices[1]).toMatch(/^warning: could not keep the CPU peak in .* \(cannot create the cache folder: (a parent of the output path is a file|a file is in the way)[^)]*\); it will be measured again next time$/);
  });
});
