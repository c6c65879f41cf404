import type { ModelConfig } from "../../src/model/config.js";
import type { Batch, TrainerConfig } from "../../src/train/trainer.js";

/** The data-parallel tests' trainer: `rows` rows of `seq` a step, AdamW with clipping, a cosine schedule at lr 1e-2 over `steps`. */
export function dataParallelConfig(model: ModelConfig, rows: number, seq: number, steps: number): TrainerConfig {
  return {
    model,
    batchSize: rows,
    seqLen: seq,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "cosine", peak: 1e-2, min: 1e-3, warmupSteps: 2, maxSteps: steps },
    seed: 5,
  };
}

/**
 * Global batch `step` of `rows` rows of `seq` ids and next-token-like targets; the first
 * `ignored` targets are -1, so ranks that slice it see different valid counts.
 */
export function globalBatch(step: number, vocab: number, rows: number, seq: number, ignored: number): Batch {
  const n = rows * seq;
  const ids = new Int32Array(n);
  const targets = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    ids[i] = (i * 13 + step * 7 + ((i * i) % 5)) % vocab;
    targets[i] = (i * 11 + step * 3 + 1) % vocab;
  }
  for (let i = 0; i < ignored; i++) targets[i] = -1;
  return { ids, targets };
}

/** Rank `rank`'s slice of a global batch of `rows` rows of `seq` (its rows, in order). */
export function sliceOf(b: Batch, rank: number, ranks: number, rows: number, seq: number): Batch {
  const n = (rows / ranks) * seq;
  return { ids: b.ids.slice(rank * n, (rank + 1) * n), targets: b.targets.slice(rank * n, (rank + 1) * n) };
}

/** The largest |a - b| over every parameter of two name -> values maps (the same names). */
export function maxAbsDiff(a: Map<string, Float32Array>, b: Map<string, Float32Array>): number {
  let worst = 0;
  for (const [name, x] of a) {
    const y = b.get(name);
    if (!y) throw new Error(`no ${name} to compare with`);
    for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  }
  return worst;
}
