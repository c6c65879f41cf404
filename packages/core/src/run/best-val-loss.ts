import { META_BEST_VAL_LOSS, META_EVALS_SINCE_BEST } from "../checkpoint/checkpoint-keys.js";

/**
 * The run's lowest validation loss and the evaluations since it, for --save-best
 * and --early-stop N. Carried in checkpoints, so a resumed run goes on counting.
 */
export class BestValLoss {
  private best: { step: number; loss: number } | undefined;
  private sinceBest = 0;

  /** `patience`: evaluations without improvement that stop the run (undefined: never). */
  constructor(
    private readonly patience: number | undefined,
    restored: Record<string, string> = {},
  ) {
    const best = restored[META_BEST_VAL_LOSS];
    if (best !== undefined) this.best = JSON.parse(best) as { step: number; loss: number };
    this.sinceBest = Number(restored[META_EVALS_SINCE_BEST] ?? 0);
  }

  /** Records an evaluation: whether it is the lowest so far, and whether the run should stop. */
  record(step: number, loss: number): { improved: boolean; stop: boolean } {
    const improved = this.best === undefined || loss < this.best.loss;
    if (improved) {
      this.best = { step, loss };
      this.sinceBest = 0;
    } else {
      this.sinceBest++;
    }
    return { improved, stop: this.patience !== undefined && this.sinceBest >= this.patience };
  }

  /** The last line of a run --early-stop ended. */
  stopLine(step: number): string {
    const best = this.best!;
    return `early stop at step ${step}: val_loss has not improved on ${best.loss.toFixed(4)} (step ${best.step}) for ${this.sinceBest} evaluation${this.sinceBest === 1 ? "" : "s"}`;
  }

  metadata(): Record<string, string> {
    return this.best === undefined ? {} : { [META_BEST_VAL_LOSS]: JSON.stringify(this.best), [META_EVALS_SINCE_BEST]: String(this.sinceBest) };
  }
}
