/** Dynamic loss scaling for f16 training (as torch.cuda.amp.GradScaler). */
export interface LossScalerConfig {
  /** The scale of the first step (default 2^16). */
  initialScale: number;
  /** Consecutive finite steps after which the scale doubles (default 2000). */
  growthInterval: number;
}

/** What a checkpoint keeps of a scaler: the scale and the finite steps since it last changed. */
export interface LossScalerState {
  scale: number;
  goodSteps: number;
}

export const DEFAULT_LOSS_SCALER: LossScalerConfig = { initialScale: 2 ** 16, growthInterval: 2000 };

/**
 * The loss is multiplied by `scale` before the backward pass so small f16
 * gradients do not flush to zero; the optimizer divides it out. A step whose
 * gradients hold an inf or NaN is skipped and the scale halves; after
 * `growthInterval` finite steps in a row the scale doubles.
 */
export class DynamicLossScaler {
  scale: number;
  goodSteps = 0;

  constructor(readonly config: LossScalerConfig = DEFAULT_LOSS_SCALER) {
    if (!(config.initialScale > 0) || !Number.isFinite(config.initialScale)) throw new Error(`initial loss scale must be finite and > 0, got ${config.initialScale}`);
    if (!Number.isSafeInteger(config.growthInterval) || config.growthInterval < 1) throw new Error(`growth interval must be a positive integer, got ${config.growthInterval}`);
    this.scale = config.initialScale;
  }

  /** Records a step's outcome; returns true when the step must be skipped (its gradients were not finite). */
  update(finite: boolean): boolean {
    if (!finite) {
      this.scale *= 0.5;
      this.goodSteps = 0;
      return true;
    }
    if (++this.goodSteps >= this.config.growthInterval) {
      this.scale *= 2;
      this.goodSteps = 0;
    }
    return false;
  }

  get state(): LossScalerState {
    return { scale: this.scale, goodSteps: this.goodSteps };
  }

  set state(s: LossScalerState) {
    this.scale = s.scale;
    this.goodSteps = s.goodSteps;
  }
}
