import { type Backend, type BufferHandle, KilnError } from "@kiln/contract";
import { CompiledStep } from "../exec/compiled-step.js";
import type { ModelConfig } from "../model/config.js";
import { type ModelGraph, positionIds } from "../model/build-graph.js";
import { uploadInitialParams } from "../model/init-params.js";
import type { ParamLayout } from "../model/param-layout.js";
import { AdamW, type AdamWConfig } from "../optim/adamw.js";
import type { RecomputePolicy } from "../autodiff/rematerialize.js";
import { type LrScheduleConfig, learningRateAt } from "../optim/lr-schedule.js";
import { ForwardRunner } from "./forward-runner.js";
import type { MemoryPlan } from "./memory-plan.js";
import { TRAINER_SCALAR_BYTES, planTraining } from "./plan-training.js";

export interface TrainerConfig {
  model: ModelConfig;
  batchSize: number;
  seqLen: number;
  optimizer: AdamWConfig & { gradClip: number };
  schedule: LrScheduleConfig;
  seed: number;
  /** Activations recomputed in the backward pass instead of kept (default "cheap"). */
  recompute?: RecomputePolicy;
}

/** One micro-batch: token ids and next-token targets, batchSize*seqLen each (targets < 0 are ignored). */
export interface Batch {
  ids: Int32Array;
  targets: Int32Array;
}

/** Micro-batches read one at a time (the previous one may be overwritten by the next). */
export interface BatchSource {
  count: number;
  next(): Promise<Batch>;
}

export interface StepResult {
  /** Mean loss over the valid targets of every micro-batch. */
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** Learning rate used by this step. */
  lr: number;
  /** Tokens processed (every position of every micro-batch). */
  tokens: number;
}

/**
 * Trains a model on a backend: plans the step once (exact memory before any
 * allocation), then each step() replays forward, backward, clip and AdamW.
 */
export class Trainer {
  readonly layout: ParamLayout;
  readonly stateLayout: ParamLayout;
  readonly memoryPlan: MemoryPlan;
  /** Optimizer steps taken so far. */
  stepCount = 0;

  private readonly model: ModelGraph;
  private readonly compiled: CompiledStep;
  private readonly buffers: { params: BufferHandle; grads: BufferHandle; m: BufferHandle; v: BufferHandle; scalars: BufferHandle };
  private readonly adamw: AdamW;
  private readonly scalarHost = new Float32Array(1);
  private readonly lossHost = new Float32Array(1);

  constructor(
    readonly backend: Backend,
    readonly config: TrainerConfig,
  ) {
    const { model, batchSize, seqLen } = config;
    if (seqLen > model.maxSeqLen) {
      throw new KilnError(`sequence length ${seqLen} is longer than the model's max_seq_len ${model.maxSeqLen}`, {
        where: "seq_len",
        hint: "lower seq_len or raise model.max_seq_len",
      });
    }
    const planned = planTraining(model, batchSize, seqLen, "f32", config.recompute ?? "cheap");
    this.layout = planned.layout;
    this.stateLayout = planned.stateLayout;
    this.model = planned.graph;
    this.memoryPlan = planned.memory;
    const plan = planned.step;
    const params = backend.alloc(this.layout.bytes);
    const grads = backend.alloc(this.layout.bytes);
    const m = backend.alloc(this.stateLayout.bytes);
    const v = backend.alloc(this.stateLayout.bytes);
    const scalars = backend.alloc(TRAINER_SCALAR_BYTES);
    this.buffers = { params, grads, m, v, scalars };
    this.compiled = new CompiledStep(this.model.graph, plan, backend, { params, grads, offsets: this.layout.offsets });
    this.adamw = new AdamW(backend, this.layout, this.stateLayout, { params, grads, m, v }, config.optimizer);

    uploadInitialParams(backend, params, this.layout, config.seed);
    backend.kernels.fill({ out: m, n: this.stateLayout.bytes / 4, value: 0, dtype: "f32" });
    backend.kernels.fill({ out: v, n: this.stateLayout.bytes / 4, value: 0, dtype: "f32" });
    if (this.model.positions !== undefined) this.compiled.upload(this.model.positions, positionIds(batchSize, seqLen));
  }

  /** Tokens per micro-batch. */
  get tokensPerBatch(): number {
    return this.config.batchSize * this.config.seqLen;
  }

  /** The device buffers of parameters and optimizer state (checkpoints read and write them). */
  get stateBuffers() {
    return this.buffers;
  }

  /**
   * One optimizer step over micro-batches (gradient accumulation): forward and
   * backward on each, gradients summed, clipped to the global norm, AdamW.
   * With an array, the loss is the mean over every valid target of every
   * micro-batch. With a source (batches read one at a time, e.g. from a
   * Prefetcher whose buffers are reused), it is the mean of the micro-batches'
   * means, as nanoGPT does; the two agree when micro-batches have equal valid counts.
   */
  async step(microBatches: readonly Batch[] | BatchSource): Promise<StepResult> {
    const count = "next" in microBatches ? microBatches.count : microBatches.length;
    if (count < 1) throw new Error("step() needs at least one batch");
    const totalValid = "next" in microBatches ? undefined : microBatches.reduce((s, b) => s + countValid(b.targets), 0);
    this.backend.kernels.fill({ out: this.buffers.grads, n: this.layout.bytes / 4, value: 0, dtype: "f32" });
    let loss = 0;
    for (let i = 0; i < count; i++) {
      const batch = "next" in microBatches ? await microBatches.next() : microBatches[i];
      const valid = countValid(batch.targets);
      // The loss is a mean over `denominator` target rows; each row's gradient is 1 / denominator.
      const denominator = totalValid ?? valid * count;
      if (denominator > 0) loss += (await this.forwardBackward(batch, 1 / denominator)) / denominator;
    }
    const { grads, scalars } = this.buffers;
    this.backend.kernels.sumSquares({ x: grads, out: scalars, n: this.layout.bytes / 4, dtype: "f32" });
    await this.backend.download(scalars, this.scalarHost);
    const gradNorm = Math.sqrt(this.scalarHost[0]);
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
    const clip = this.config.optimizer.gradClip;
    const gradScale = clip > 0 ? Math.min(1, clip / (gradNorm + 1e-6)) : 1;
    const lr = learningRateAt(this.config.schedule, this.stepCount);
    this.adamw.update(lr, this.stepCount + 1, gradScale);
    this.stepCount++;
    await this.backend.synchronize();
    return { loss, gradNorm, lr, tokens: count * this.tokensPerBatch };
  }

  /**
   * Forward and backward of one micro-batch: adds its gradients, each target row
   * weighted by lossScale, to the gradient buffer; returns its summed row losses.
   */
  private async forwardBackward(batch: Batch, lossScale: number): Promise<number> {
    this.checkBatch(batch);
    this.compiled.runtime.lossScale = lossScale;
    this.compiled.upload(this.model.ids, batch.ids);
    this.compiled.upload(this.model.training!.targets, batch.targets);
    this.compiled.run();
    await this.compiled.download(this.model.training!.lossSum, this.lossHost);
    return this.lossHost[0];
  }

  /** Overwrites parameters by name (f32 values), e.g. from a checkpoint or a PyTorch dump. */
  loadParameters(values: ReadonlyMap<string, Float32Array>): void {
    for (const s of this.layout.specs) {
      const v = values.get(s.name);
      if (!v) throw new KilnError(`no value for parameter ${s.name}`, { where: s.name, hint: "the checkpoint does not match this model" });
      const n = s.shape.reduce((a, b) => a * b, 1);
      if (v.length !== n) throw new KilnError(`parameter ${s.name} has ${v.length} values, the model needs ${n}`, { where: s.name });
      this.backend.upload({ buffer: this.buffers.params, byteOffset: this.layout.offsets.get(s.name)! }, v);
    }
  }

  /** Every parameter (or its gradient from the last step) as f32 values by name. */
  async readParameters(which: "params" | "grads" | "m" | "v" = "params"): Promise<Map<string, Float32Array>> {
    const layout = which === "m" || which === "v" ? this.stateLayout : this.layout;
    const buffer = this.buffers[which];
    const out = new Map<string, Float32Array>();
    for (const s of layout.specs) {
      const v = new Float32Array(s.shape.reduce((a, b) => a * b, 1));
      await this.backend.download({ buffer, byteOffset: layout.offsets.get(s.name)! }, v);
      out.set(s.name, v);
    }
    return out;
  }

  /** Runs forward and backward on one batch without updating; returns its mean loss (gradients stay in the grads buffer). */
  async lossAndGradients(batch: Batch): Promise<number> {
    const valid = countValid(batch.targets);
    this.backend.kernels.fill({ out: this.buffers.grads, n: this.layout.bytes / 4, value: 0, dtype: "f32" });
    if (valid === 0) return 0;
    return (await this.forwardBackward(batch, 1 / valid)) / valid;
  }

  /** A forward-only runner over this trainer's parameters (evaluation, generation). */
  forwardRunner(batchSize: number, seqLen: number): ForwardRunner {
    return new ForwardRunner(this.backend, this.config.model, this.layout, this.buffers.params, batchSize, seqLen);
  }

  dispose(): void {
    this.compiled.dispose();
    for (const b of Object.values(this.buffers)) this.backend.free(b);
  }

  private checkBatch(b: Batch): void {
    const n = this.tokensPerBatch;
    if (b.ids.length !== n || b.targets.length !== n) {
      throw new Error(`a batch needs ${n} ids and targets (batch ${this.config.batchSize} x seq ${this.config.seqLen}), got ${b.ids.length} and ${b.targets.length}`);
    }
  }
}

function countValid(targets: Int32Array): number {
  let n = 0;
  for (let i = 0; i < targets.length; i++) if (targets[i] >= 0) n++;
  return n;
}
