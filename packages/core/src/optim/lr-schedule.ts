/** The shapes of the learning rate after warmup. */
export const LR_SCHEDULES = ["cosine", "linear", "constant"] as const;
export type LrScheduleKind = (typeof LR_SCHEDULES)[number];

/** Learning rate over steps: linear warmup, then cosine, linear or constant. */
export interface LrScheduleConfig {
  kind: LrScheduleKind;
  /** Peak learning rate, reached at the end of warmup. */
  peak: number;
  /** Final learning rate of cosine / linear decay. */
  min: number;
  warmupSteps: number;
  /** Step at which decay reaches `min`. */
  maxSteps: number;
}

/**
 * The learning rate of 0-based step t:
 *   t < warmup:  peak * (t + 1) / warmup
 *   after:       p = (t - warmup) / (maxSteps - warmup) clamped to [0, 1]
 *                cosine: min + (peak - min) * (1 + cos(pi p)) / 2;  linear: peak - (peak - min) p
 */
export function learningRateAt(s: LrScheduleConfig, t: number): number {
  if (t < s.warmupSteps) return (s.peak * (t + 1)) / s.warmupSteps;
  if (s.kind === "constant") return s.peak;
  const span = Math.max(1, s.maxSteps - s.warmupSteps);
  const p = Math.min(1, Math.max(0, (t - s.warmupSteps) / span));
  if (s.kind === "linear") return s.peak - (s.peak - s.min) * p;
  return s.min + 0.5 * (s.peak - s.min) * (1 + Math.cos(Math.PI * p));
}
