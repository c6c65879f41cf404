import type { ModelConfig } from "../../src/model/config.js";
import type { TrainerConfig } from "../../src/train/trainer.js";

/** A small test trainer: AdamW (0.9, 0.95, eps 1e-8, decay 0.1, clipping at 1) at a constant learning rate of 1e-3. */
export function constantLrConfig(model: ModelConfig, batchSize: number, seqLen: number, seed: number): TrainerConfig {
  return {
    model,
    batchSize,
    seqLen,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 10 },
    seed,
  };
}
