import type { CeilingResult } from "@kiln/kernels-wasm";

/** How hard to look for the CPU's peak. */
export interface StablePeakOptions {
  /** Short calls first, so V8 compiles the kernel in its optimising tier (its baseline runs at a fraction of the speed). */
  warmupCalls: number;
  /** Length of one measured round. */
  roundSeconds: number;
  minRounds: number;
  maxRounds: number;
  /** Stop once the two fastest rounds agree within this fraction. */
  agreement: number;
}

/** About a second on an idle machine; up to two on a busy one. */
export const STABLE_PEAK: StablePeakOptions = { warmupCalls: 800, roundSeconds: 0.1, minRounds: 6, maxRounds: 16, agreement: 0.02 };

export interface PeakMeasurement {
  /** FLOP/s of the fastest round: other work on the machine only ever slows a round down. */
  flopsPerSecond: number;
  /** Every round's FLOP/s, in order. */
  rounds: number[];
  /** Time spent measuring, warm-up included. */
  seconds: number;
}

const WARMUP_ITERATIONS = 200;
const PROBE_ITERATIONS = 100_000;

/**
 * The multiply-add ceiling, measured until it is stable: warm up, size a round from one
 * probe call, then run rounds until the two fastest agree (or `maxRounds`), and keep the
 * fastest. `ceiling(iterations)` runs the register-only kernel on every thread.
 */
export function measureStablePeak(ceiling: (iterations: number) => CeilingResult, o: StablePeakOptions = STABLE_PEAK): PeakMeasurement {
  let seconds = 0;
  for (let i = 0; i < o.warmupCalls; i++) seconds += ceiling(WARMUP_ITERATIONS).seconds;
  const probe = ceiling(PROBE_ITERATIONS);
  seconds += probe.seconds;
  const iterations = Math.max(WARMUP_ITERATIONS, Math.round((PROBE_ITERATIONS * o.roundSeconds) / Math.max(probe.seconds, 1e-6)));
  const rounds: number[] = [];
  while (rounds.length < o.maxRounds) {
    const r = ceiling(iterations);
    seconds += r.seconds;
    rounds.push(r.flops / r.seconds);
    if (rounds.length >= o.minRounds && topTwoAgree(rounds, o.agreement)) break;
  }
  return { flopsPerSecond: Math.max(...rounds), rounds, seconds };
}

function topTwoAgree(rounds: readonly number[], agreement: number): boolean {
  const [first, second] = [...rounds].sort((a, b) => b - a);
  return second !== undefined && first - second <= agreement * first;
}
