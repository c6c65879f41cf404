import { type Backend, type FloatDType, TrainingError } from "@kiln/contract";
import { META_CONFIG, META_DATA_CURSOR, META_DATA_CURSORS } from "../checkpoint/checkpoint-keys.js";
import type { BatchSampler, SamplerCursor } from "../data/batch-sampler.js";
import { Prefetcher } from "../data/prefetcher.js";
import type { StepProfiler } from "../exec/step-profiler.js";
import type { RunSettings } from "../settings/run-settings.js";
import type { ForwardRunner } from "../train/forward-runner.js";
import type { GradientSync } from "../train/gradient-sync.js";
import { type StepResult, Trainer } from "../train/trainer.js";
import { BestValLoss } from "./best-val-loss.js";
import { evaluate } from "./evaluate.js";
import { type RunPlan, planRun } from "./plan-run.js";
import { type StepLimit, stepLimit } from "./step-limit.js";

/** Where a run saves: a step checkpoint (the save schedule, the end) or the lowest val_loss so far (--save-best). */
export type SaveKind = "step" | "best";

export interface TrainingRunOptions {
  /** The run's settings (resolveSettings; the web page's are the same). */
  settings: RunSettings;
  backend: Backend;
  /** The storage dtype the run trains in ("auto" already chosen for the device). */
  dtype: FloatDType;
  /** This rank's training and validation batches. */
  data: { train: BatchSampler; val: BatchSampler };
  /** Data parallel: this rank's communicator, the gradient bucket bytes, and the sum of scalars over ranks (evaluation). */
  ranks?: { sync: GradientSync; bucketBytes: number; sumOverRanks: (values: Float64Array) => Promise<Float64Array> };
  profiler?: StepProfiler;
  /** Run each micro-batch as one recorded kernel graph where the backend records them. */
  kernelGraphs?: boolean;
  /**
   * Writes a checkpoint of `kind` with `metadata` (the run's: config, data cursor, best val_loss),
   * when the save schedule says so; without it the run saves nothing (the web page saves on request).
   */
  save?: (kind: SaveKind, metadata: (cursors?: SamplerCursor[]) => Record<string, string>) => Promise<void>;
  /** What the checkpoints say of the data and its tokenizer (checkpoint metadata). */
  describeData?: Record<string, string>;
  /** Report the log window at the first step too (a chart then starts from the untrained loss). */
  logFirstStep?: boolean;
}

/** What one step of a run did, for the caller to present. */
export interface StepReport {
  step: number;
  result: StepResult;
  /** On a log interval (and the last step): the window's timing since the last log line. */
  window?: { steps: number; tokens: number; seconds: number; epoch: number };
  /** On an evaluation step: the validation loss and whether it is the lowest so far. */
  eval?: { valLoss: number; improved: boolean };
  /** The line that ends an early-stopped run (--early-stop), on the step that stops it. */
  earlyStop?: string;
}

/**
 * A training run: settings, one plan, the trainer built from it, and the loop's schedule
 * (log windows, evaluation, best checkpoint and early stop, save interval, the data
 * position and what checkpoints record). kiln train and the web page drive it a step
 * at a time and present what it reports.
 */
export class TrainingRun {
  readonly plan: RunPlan;
  readonly trainer: Trainer;
  readonly runner: ForwardRunner;
  readonly prefetcher: Prefetcher;
  readonly totalSteps: number;
  /** The run's length and which limit decides (max_steps or num_epochs, whichever ends first). */
  readonly stepLimit: StepLimit;
  /** The step of the newest checkpoint the run wrote (or resumed from). */
  lastSaved = 0;
  private bestVal: BestValLoss;
  private earlyStopped = false;
  private lastFinite: { step: number; loss: number } | undefined;
  private window = { start: 0, steps: 0, tokens: 0 };

  /** Plans the run (refusing, with advice, one the device cannot hold) and builds its trainer from that plan. */
  constructor(private readonly o: TrainingRunOptions) {
    // One plan for the run: the Trainer builds its step from it instead of planning again.
    const s = o.settings;
    // --shard-optimizer: each rank plans and holds its share of the optimizer state.
    const shardRanks = s.shardOptimizer && o.ranks ? o.ranks.sync.worldSize : 1;
    // trainer.pack on example data: the samplers pack rows, and the step takes their document starts.
    const packed = o.data.train.packing !== undefined;
    this.plan = planRun({ ...s, shardRanks, packed }, o.dtype, o.backend.capabilities().device);
    this.stepLimit = stepLimit(s, o.data.train.batchesPerEpoch);
    this.totalSteps = this.stepLimit.total;
    this.trainer = new Trainer(o.backend, {
      model: s.model,
      batchSize: s.batchSize,
      seqLen: s.seqLen,
      optimizer: { beta1: s.beta1, beta2: s.beta2, eps: s.eps, weightDecay: s.weightDecay, gradClip: s.gradClip },
      schedule: { kind: s.schedule, peak: s.lr, min: s.minLr, warmupSteps: s.warmupSteps, maxSteps: this.totalSteps },
      seed: s.seed,
      plan: this.plan,
      dtype: o.dtype,
      loadBalanceAlpha: s.loadBalanceAlpha,
      packed,
      ...(o.ranks ? { gradientSync: o.ranks.sync, bucketBytes: o.ranks.bucketBytes, shardOptimizer: shardRanks > 1 } : {}),
      ...(o.profiler ? { profiler: o.profiler } : {}),
      ...(o.kernelGraphs ? { kernelGraphs: true } : {}),
    });
    this.bestVal = new BestValLoss(s.earlyStop);
    this.runner = this.trainer.forwardRunner(s.batchSize, s.seqLen);
    this.prefetcher = new Prefetcher(o.data.train, Math.max(1, s.prefetch));
  }

  /** Takes up a checkpoint's run: its data position (this rank's) and best val_loss. The trainer's state is restored by the caller. */
  async resumed(metadata: Record<string, string>, rank = 0): Promise<void> {
    this.bestVal = new BestValLoss(this.o.settings.earlyStop, metadata);
    const cursors = metadata[META_DATA_CURSORS] ? (JSON.parse(metadata[META_DATA_CURSORS]) as SamplerCursor[]) : undefined;
    const cursor = cursors?.[rank] ?? (metadata[META_DATA_CURSOR] ? (JSON.parse(metadata[META_DATA_CURSOR]) as SamplerCursor) : undefined);
    // The prefetcher has read ahead from the old position: set the sampler's, then start it again there.
    if (cursor) await this.prefetcher.setCursor(cursor);
    this.lastSaved = this.trainer.stepCount;
  }

  /** Whether the run has reached its last step or stopped early. */
  get done(): boolean {
    return this.trainer.stepCount >= this.totalSteps || this.earlyStopped;
  }

  /** Sets what the checkpoints say of the data and its tokenizer (known once the data and the weights are open). */
  describe(data: Record<string, string>): void {
    this.o.describeData = data;
  }

  /** What checkpoints of the run record besides the trainer's state; `cursors`: every rank's data position (one rank: this one's). */
  metadata(cursors: SamplerCursor[] = [this.prefetcher.getCursor()]): Record<string, string> {
    return {
      [META_DATA_CURSOR]: JSON.stringify(this.prefetcher.getCursor()),
      [META_DATA_CURSORS]: JSON.stringify(cursors),
      [META_CONFIG]: this.o.settings.configText,
      ...this.bestVal.metadata(),
      ...this.o.describeData,
    };
  }

  /** Mean validation loss over the first eval_iters batches (of every rank's slice). */
  evaluate(): Promise<number> {
    return evaluate(this.runner, this.o.data.val, this.o.settings.evalIters, this.o.ranks?.sumOverRanks);
  }

  /** Starts the log window's clock again (after a pause, so that waiting does not count). */
  restartWindow(): void {
    this.window = { start: performance.now(), steps: 0, tokens: 0 };
  }

  /**
   * One optimizer step and what the schedule asks at it: the log window on log steps, an
   * evaluation (and the best checkpoint) on evaluation steps, a checkpoint on save steps.
   * A step whose values went NaN or infinite stops the run unless on_nonfinite is skip.
   */
  async step(): Promise<StepReport> {
    const s = this.o.settings;
    if (this.window.start === 0) this.restartWindow();
    const result = await this.trainer.step({ count: s.gradAccum, next: () => this.prefetcher.next() });
    const step = this.trainer.stepCount;
    this.window.steps++;
    this.window.tokens += result.tokens * this.trainer.worldSize;
    if (result.nonFinite && s.onNonFinite === "stop") throw this.nonFiniteError(step);
    if (!result.nonFinite) this.lastFinite = { step, loss: result.loss };
    const report: StepReport = { step, result };
    const last = step === this.totalSteps;
    if (step % s.logInterval === 0 || last || (step === 1 && this.o.logFirstStep)) {
      report.window = { steps: this.window.steps, tokens: this.window.tokens, seconds: (performance.now() - this.window.start) / 1000, epoch: this.prefetcher.epochProgress };
      this.restartWindow();
    }
    if (step % s.evalInterval === 0 || last) {
      const valLoss = await this.evaluate();
      // Every rank has the same val_loss, so every rank takes the same turns here.
      const verdict = this.bestVal.record(step, valLoss);
      report.eval = { valLoss, improved: verdict.improved };
      if (verdict.improved && s.saveBest) await this.o.save?.("best", (cursors) => this.metadata(cursors));
      if (verdict.stop) {
        this.earlyStopped = true;
        report.earlyStop = this.bestVal.stopLine(step);
      }
    }
    if (step % s.saveInterval === 0) await this.saveStep();
    return report;
  }

  /** Writes a step checkpoint unless the newest one is of this step (at the end of a run, or when it is stopped). */
  async finish(): Promise<void> {
    if (this.trainer.stepCount !== this.lastSaved) await this.saveStep();
  }

  private async saveStep(): Promise<void> {
    if (!this.o.save) return;
    await this.o.save("step", (cursors) => this.metadata(cursors));
    this.lastSaved = this.trainer.stepCount;
  }

  /** Stops the data reader and frees the device buffers. */
  async dispose(): Promise<void> {
    await this.prefetcher.close();
    this.runner.dispose();
    this.trainer.dispose();
  }

  /**
   * The run stops at a NaN or infinite loss or gradients (before the update and before any
   * checkpoint of that step): what went wrong, the last finite loss, and what to try.
   */
  private nonFiniteError(step: number): TrainingError {
    const s = this.o.settings;
    const last = this.lastFinite ? `; the last finite loss was ${this.lastFinite.loss.toPrecision(5)} at step ${this.lastFinite.step}` : "";
    const kept = !this.o.save
      ? `the weights are those of step ${step - 1}`
      : this.lastSaved > 0
        ? `checkpoints up to step ${this.lastSaved} in ${s.outputDir} are untouched (resume with --resume auto)`
        : "no checkpoint was written";
    return new TrainingError(`the loss or the gradients became NaN or infinite at step ${step}${last}`, {
      where: `${s.configPath} (step ${step})`,
      hint:
        `lower the learning rate (now ${s.lr}), keep gradient clipping on (trainer.grad_clip, now ${s.gradClip}), or train in f32 or bf16 rather than f16; ` +
        `${this.o.save ? "--on-nonfinite skip skips such steps instead; " : ""}${kept}`,
    });
  }
}
