import { type Backend, type BufferHandle, type BufferSlice, type FloatDType, dropoutMix, type Kernels, KilnError, bytesPerElement, decodeElements, encodeElements } from "@kiln/contract";
import { CompiledStep } from "../exec/compiled-step.js";
import type { Batch } from "../data/batch.js";
import { withProfiledKernels } from "../exec/profiled-kernels.js";
import type { StepProfiler } from "../exec/step-profiler.js";
import { type ModelConfig, moeOf } from "../model/config.js";
import { type ModelGraph, positionIds } from "../model/build-graph.js";
import { uploadInitialParams } from "../model/init-params.js";
import { type ParamLayout, type ParamSlot, type ParamSpec, slotsOf } from "../model/param-layout.js";
import { elementCount } from "../graph/tensor.js";
import type { ParameterPiece } from "../hf/pretrained-weights.js";
import { AdamW, type AdamWConfig } from "../optim/adamw.js";
import type { RecomputePolicy } from "../autodiff/rematerialize.js";
import { type LrScheduleConfig, learningRateAt } from "../optim/lr-schedule.js";
import { ForwardRunner, uploadDocuments } from "./forward-runner.js";
import { DEFAULT_LOSS_SCALER, DynamicLossScaler, type LossScalerConfig } from "./loss-scaler.js";
import { MasterWeights } from "./master-weights.js";
import { assertBackendTrains } from "./training-dtype.js";
import type { MemoryPlan } from "./memory-plan.js";
import { TRAINER_SCALAR_BYTES } from "./plan-training.js";
import type { RecomputeSetting } from "./recompute-choice.js";
import { type RunPlan, chooseRunPlan } from "../run/plan-run.js";
import { ExpertLoad } from "./expert-load.js";
import { measureGradients, zeroGradients } from "./gradient-kernels.js";
import { DataParallelSync } from "./data-parallel.js";
import { DEFAULT_BUCKET_BYTES, planGradientBuckets } from "./gradient-buckets.js";
import type { GradientSync } from "./gradient-sync.js";
import { type OptimizerShard, optimizerShard, ownedElements, shardTail } from "./optimizer-shard.js";
import { ShardedWeights, ownedPart } from "./sharded-weights.js";

/** Byte offset of the micro-batch loss slots in the trainer's scalar buffer (after the gradient norm and the finite flag)... */
const LOSS_SLOTS_OFFSET = 8;
/** ...and how many there are: losses of more micro-batches are read back in groups of this many. */
const LOSS_SLOTS = (TRAINER_SCALAR_BYTES - LOSS_SLOTS_OFFSET) / 4;

/** Mixture-of-experts load-balancing coefficient when a config names none (Switch Transformer's 0.01). */
export const DEFAULT_LOAD_BALANCE_ALPHA = 0.01;

export interface TrainerConfig {
  model: ModelConfig;
  batchSize: number;
  seqLen: number;
  optimizer: AdamWConfig & { gradClip: number };
  schedule: LrScheduleConfig;
  seed: number;
  /** Activations recomputed in the backward pass instead of kept (default "auto": see resolveRecompute). */
  recompute?: RecomputeSetting;
  /**
   * The run's plan (planRun), made for this model, batch, sequence length, dtype and device:
   * the trainer builds its step from it instead of planning again, and `recompute` is the plan's.
   */
  plan?: RunPlan;
  /**
   * The logits bytes one chunk of the training loss may hold (default 16 MiB on a CPU,
   * 1 GiB on a GPU: GPU_LOGITS_CHUNK_BYTES): less memory for the loss's logits, against
   * more passes over the head weight's gradient.
   */
  lossChunkBytes?: number;
  /**
   * Storage dtype of parameters and activations (default f32). Parameter gradients
   * are f32 in every dtype; with bf16 or f16, AdamW updates f32 master weights from
   * them, and its state stays f32; f16 adds dynamic loss scaling.
   */
  dtype?: FloatDType;
  /** f16 only: the loss scaler's start and growth interval (defaults 2^16 and 2000). */
  lossScaler?: Partial<LossScalerConfig>;
  /** Mixture-of-experts models: the load-balancing loss coefficient (default 0.01). */
  loadBalanceAlpha?: number;
  /**
   * Data-parallel training: the communicator of this rank. Each step sums the
   * gradients of every rank's micro-batches (the global batch) before clipping
   * and AdamW, and the first step makes every rank start from rank 0's state.
   * Absent, or with one rank: no sync.
   */
  gradientSync?: GradientSync;
  /**
   * With a gradient sync of several ranks: shard AdamW's state (and the f32 masters under a
   * 16-bit dtype) over the ranks (ZeRO stage 1, `--shard-optimizer`): gradients are
   * reduce-scattered, each rank updates the elements it owns, and the parameters are
   * all-gathered after the update. The plan (`plan`) must be made for as many ranks.
   */
  shardOptimizer?: boolean;
  /**
   * Rows packed with several documents: every batch carries docStarts, which the attention and
   * rotary kernels take (and learned positions count from). The plan (`plan`) must be made so too.
   */
  packed?: boolean;
  /** Bytes of each gradient bucket handed to the communicator (default 25 MiB). */
  bucketBytes?: number;
  /**
   * Times every kernel call and data wait of the steps taken while it is armed
   * (`kiln train --profile`). Absent, the trainer runs no timing code.
   */
  profiler?: StepProfiler;
  /**
   * Runs each micro-batch's forward and backward as one recorded kernel graph on a
   * backend that records them (`backend.graphs`: CUDA graphs), from the second
   * micro-batch on, except in profiled steps and with data parallelism (default false).
   */
  kernelGraphs?: boolean;
}

export type { Batch } from "../data/batch.js";

/** A sharded optimizer's state gathered whole (Trainer.wholeOptimizerState): f32 values in the state layout. */
export interface WholeOptimizerState {
  m: Float32Array;
  v: Float32Array;
  /** Under a 16-bit dtype: the f32 master weights. */
  master?: Float32Array;
}

/** Micro-batches read one at a time (the previous one may be overwritten by the next). */
export interface BatchSource {
  count: number;
  next(): Promise<Batch>;
}

export interface StepResult {
  /** Mean loss over the valid targets of every micro-batch (of every rank: the global batch). */
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** Learning rate used by this step. */
  lr: number;
  /** Tokens processed by this rank (every position of every micro-batch). */
  tokens: number;
  /** The update was not applied: f16 gradients overflowed (the loss scale halved), or the values went non-finite. */
  skipped: boolean;
  /**
   * The loss, or in f32/bf16 the gradients, held a NaN or an infinity: the weights were
   * left as they were (f16 gradient overflow alone is the loss scaler's, and not this).
   */
  nonFinite: boolean;
  /** f16: the loss scale this step's backward pass used. */
  lossScale?: number;
  /**
   * Mixture-of-experts models: the load-balancing loss (summed over layers, times alpha),
   * averaged over micro-batches and ranks; the objective is loss + auxLoss.
   */
  auxLoss?: number;
  /**
   * Mixture-of-experts models: this rank's busiest expert's tokens over an even share in
   * the step (1 = even; the largest over layers).
   */
  expertImbalance?: number;
}

/**
 * Trains a model on a backend: plans the step once (exact memory before any
 * allocation), then each step() replays forward, backward, clip and AdamW.
 */
export class Trainer {
  readonly layout: ParamLayout;
  readonly stateLayout: ParamLayout;
  readonly memoryPlan: MemoryPlan;
  /** Training steps taken so far (skipped steps included: the schedule and logs count them). */
  stepCount = 0;
  /** Steps whose update was skipped (f16 overflow, non-finite values) so far; AdamW's bias correction counts only applied updates. */
  skippedSteps = 0;
  /** The storage dtype of parameters, gradients and activations. */
  readonly dtype: FloatDType;
  /** The activations the backward pass recomputes: the config's setting, "auto" resolved for this device. */
  readonly recompute: RecomputePolicy;
  /** f16 only: the dynamic loss scaler. */
  readonly lossScaler: DynamicLossScaler | undefined;

  private readonly model: ModelGraph;
  private readonly compiled: CompiledStep;
  private readonly buffers: { params: BufferHandle; grads: BufferHandle; m: BufferHandle; v: BufferHandle; scalars: BufferHandle };
  private readonly adamw: AdamW;
  /** Under a 16-bit dtype: f32 master weights and gradient sums. */
  private readonly masters: MasterWeights | undefined;
  /** With a sharded optimizer: the owned masters (16-bit) and the all-gather of the parameters. */
  private readonly sharded: ShardedWeights | undefined;
  /**
   * The scalar buffer as the host reads it: the squared gradient norm (f32), the
   * non-finite flag (i32), then one f32 slot per micro-batch loss not yet read back.
   */
  private readonly scalarHost = new ArrayBuffer(TRAINER_SCALAR_BYTES);
  private readonly sumSquaresHost = new Float32Array(this.scalarHost, 0, 1);
  private readonly notFiniteHost = new Int32Array(this.scalarHost, 4, 1);
  private readonly lossSlotsHost = new Float32Array(this.scalarHost, LOSS_SLOTS_OFFSET, LOSS_SLOTS);
  /** The loss scale the last backward pass used (1 unless f16). */
  private lastLossScale = 1;
  private readonly auxLossHost = new Float32Array(1);
  /** The last forward pass's auxiliary loss (0 without one). */
  private lastAuxLoss = 0;
  /** Mixture-of-experts models: tokens per expert over the current step. */
  private readonly expertLoad: ExpertLoad | undefined;
  /** With several ranks: the gradient buckets and the all-reduces of a step. */
  private readonly dataParallel: DataParallelSync | undefined;
  /** Whether every rank holds rank 0's weights and optimizer state (done by the first step). */
  private stateShared = false;
  /**
   * Sharded under a 16-bit dtype, before the first step: whether the gradient buffer holds the f32
   * weights whole (init and loads write them there for rank 0 to share; a gather overwrites them).
   */
  private weightsInGradients = false;
  private readonly profiler: StepProfiler | undefined;
  /** Micro-batches run so far by this trainer (kernel graphs start after the first, so that whatever a kernel sets up at its first call happens outside a recording). */
  private microBatchesRun = 0;
  /** The kernels the trainer calls outside the compiled step (timed as "optimizer" calls when profiling). */
  private readonly kernels: Kernels;

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
    this.dtype = config.dtype ?? "f32";
    const device = backend.capabilities().device;
    const sync = config.gradientSync;
    const shardRanks = config.shardOptimizer && sync && sync.worldSize > 1 ? sync.worldSize : 1;
    const runPlan =
      config.plan ?? chooseRunPlan({ model, batchSize, seqLen, recompute: config.recompute ?? "auto", shardRanks, packed: config.packed === true }, this.dtype, device, config.lossChunkBytes);
    this.recompute = runPlan.recompute;
    const planned = runPlan.training;
    assertBackendTrains(backend, this.dtype, planned.graph.graph);
    this.layout = planned.layout;
    this.stateLayout = planned.stateLayout;
    this.model = planned.graph;
    this.memoryPlan = planned.memory;
    const plan = planned.step;
    const params = backend.alloc(this.layout.bytes);
    // Parameter gradients are f32 in every dtype: the f32 layout.
    const grads = backend.alloc(this.stateLayout.bytes);
    // Sharded, m and v hold the owned state elements alone.
    const shard = shardRanks > 1 ? optimizerShard(this.stateLayout.bytes / 4, sync!.rank, shardRanks) : undefined;
    const stateBytes = shard ? Math.max(4, 4 * ownedElements(shard)) : this.stateLayout.bytes;
    const m = backend.alloc(stateBytes);
    const v = backend.alloc(stateBytes);
    const scalars = backend.alloc(TRAINER_SCALAR_BYTES);
    this.buffers = { params, grads, m, v, scalars };
    this.compiled = new CompiledStep(this.model.graph, plan, backend, { params, offsets: this.layout.offsets, grads: { buffer: grads, offsets: this.stateLayout.offsets } });
    this.compiled.runtime.loadBalanceAlpha = config.loadBalanceAlpha ?? DEFAULT_LOAD_BALANCE_ALPHA;
    const offsets = this.model.training!.expertOffsets;
    this.expertLoad = offsets ? new ExpertLoad(offsets, moeOf(model)!.numExperts) : undefined;
    this.profiler = config.profiler;
    // Profiling: the step's calls and the optimizer's kernels timed; otherwise the backend's own.
    const exec = this.profiler ? withProfiledKernels(backend, this.profiler, "optimizer") : backend;
    if (this.profiler) this.compiled.instrument(this.profiler);
    this.kernels = exec.kernels;
    if (shard) {
      const sw = (this.sharded = new ShardedWeights(backend, this.layout, this.stateLayout, params, shard));
      // Under a 16-bit dtype the parameters lie in state order (the sharded plan's layout): AdamW rounds into them there.
      const owned = { first: shard.first, end: shard.end, ...(sw.master ? { paramsInStateOrder: params } : {}) };
      this.adamw = new AdamW(exec, this.layout, this.stateLayout, { params, grads, m, v, ...(sw.master ? { master: sw.master } : {}) }, config.optimizer, owned);
      uploadInitialParams(backend, params, this.layout, config.seed);
      if (sw.master) {
        // The owned masters from the f32 initial values, laid out whole in the gradient buffer first.
        uploadInitialParams(backend, grads, this.stateLayout, config.seed);
        this.weightsInGradients = true;
        if (ownedElements(shard) > 0) backend.copy({ buffer: grads, byteOffset: 4 * shard.first }, { buffer: sw.master, byteOffset: 0 }, 4 * ownedElements(shard));
      }
    } else if (this.dtype === "f32") {
      this.adamw = new AdamW(exec, this.layout, this.stateLayout, { params, grads, m, v }, config.optimizer);
      uploadInitialParams(backend, params, this.layout, config.seed);
    } else {
      // AdamW updates the masters in f32 from the f32 gradients and rounds them into the 16-bit parameters.
      const masters = (this.masters = new MasterWeights(exec, this.layout, this.stateLayout, params));
      this.adamw = new AdamW(exec, this.layout, this.stateLayout, { params, grads, m, v, master: masters.master }, config.optimizer);
      // Frozen parameters have no master: they start in the 16-bit parameters themselves.
      if (this.hasFrozen) uploadInitialParams(backend, params, this.layout, config.seed);
      uploadInitialParams(backend, masters.master, this.stateLayout, config.seed);
      masters.roundToParams();
    }
    this.lossScaler = this.dtype === "f16" ? new DynamicLossScaler({ ...DEFAULT_LOSS_SCALER, ...config.lossScaler }) : undefined;
    backend.kernels.fill({ out: m, n: stateBytes / 4, value: 0, dtype: "f32" });
    backend.kernels.fill({ out: v, n: stateBytes / 4, value: 0, dtype: "f32" });
    if (this.model.positions !== undefined && this.model.docStarts === undefined) this.compiled.upload(this.model.positions, positionIds(batchSize, seqLen));
    if (sync && sync.worldSize > 1) {
      // The f32 gradients are what is synced, in every dtype: buckets of the f32 layout (sharded: one reduce-scatter instead).
      const buckets = shard ? [] : planGradientBuckets(this.model.graph, this.stateLayout, config.bucketBytes ?? DEFAULT_BUCKET_BYTES);
      this.dataParallel = new DataParallelSync(sync, backend, buckets, grads, "f32", shard);
    }
  }

  /** This process's data-parallel rank (0 without a gradient sync). */
  get rank(): number {
    return this.dataParallel?.sync.rank ?? 0;
  }

  /** Data-parallel ranks training together (1 without a gradient sync). */
  get worldSize(): number {
    return this.dataParallel?.sync.worldSize ?? 1;
  }

  /** The gradient buckets a step hands to the communicator, in the order backward finishes them (none with one rank). */
  get gradientBuckets() {
    return this.dataParallel?.buckets ?? [];
  }

  /** Tokens per micro-batch. */
  get tokensPerBatch(): number {
    return this.config.batchSize * this.config.seqLen;
  }

  /** The device buffers of parameters, optimizer state and (16-bit dtypes) f32 master weights; checkpoints read and write them. */
  get stateBuffers() {
    return { ...this.buffers, master: this.masters?.master };
  }

  /** Under a 16-bit dtype: rounds the f32 master weights into the parameters (after they were written). */
  roundMastersToParams(): void {
    this.masters?.roundToParams();
    this.sharded?.roundOwnedMasters();
  }

  /** With a sharded optimizer: this rank's part (absent otherwise). */
  get optimizerShard(): OptimizerShard | undefined {
    return this.sharded?.shard;
  }

  /**
   * With a sharded optimizer, a collective (every rank calls it, between steps): AdamW's m
   * and v and, under a 16-bit dtype, the f32 master weights, whole in the f32 state layout,
   * gathered from their owners through the gradient buffer (whose values it overwrites) and
   * read back on rank 0, which gets them; the other ranks get undefined, as does a trainer
   * whose optimizer is not sharded (its own buffers hold the whole state).
   */
  async wholeOptimizerState(): Promise<WholeOptimizerState | undefined> {
    const sw = this.sharded;
    if (!sw) return undefined;
    const read = async (which: "m" | "v" | "master") => {
      const at = await this.gatherOwned(which);
      if (this.rank !== 0) return undefined;
      const values = new Float32Array(this.stateLayout.bytes / 4);
      await this.backend.download(at, values);
      return values;
    };
    const m = await read("m");
    const v = await read("v");
    const master = sw.master ? await read("master") : undefined;
    return m && v ? { m, v, ...(master ? { master } : {}) } : undefined;
  }

  /** Sharded: every owner's m, v or masters into the whole gradient buffer (a collective), which it returns. */
  private async gatherOwned(which: "m" | "v" | "master"): Promise<BufferSlice> {
    const sw = this.sharded!;
    const { shard } = sw;
    const sync = this.dataParallel!.sync;
    const grads = this.buffers.grads;
    const own = which === "master" ? sw.master! : this.buffers[which];
    const n = ownedElements(shard);
    this.weightsInGradients = false;
    if (n > 0) this.backend.copy({ buffer: own, byteOffset: 0 }, { buffer: grads, byteOffset: 4 * shard.first }, 4 * n);
    const tail = shardTail(shard);
    if (shard.chunk > 0) await sync.allGather(this.backend, { buffer: grads, byteOffset: 0 }, 4 * shard.chunk);
    if (tail.n > 0) await sync.broadcast(this.backend, { buffer: grads, byteOffset: 4 * tail.first }, 4 * tail.n, shard.ranks - 1);
    return { buffer: grads, byteOffset: 0 };
  }

  /**
   * One optimizer step over micro-batches (gradient accumulation): forward and
   * backward on each, gradients summed, clipped to the global norm, AdamW.
   * With an array, the loss is the mean over every valid target of every
   * micro-batch. With a source (batches read one at a time, e.g. from a
   * Prefetcher whose buffers are reused), it is the mean of the micro-batches'
   * means, as nanoGPT does; the two agree when micro-batches have equal valid counts.
   *
   * With several ranks, each rank's micro-batch i is its slice of global
   * micro-batch i: valid-target counts are summed over the ranks first, so the
   * loss and the summed gradients are those of the global batch, and every rank
   * computes the same loss, gradient norm and update.
   */
  async step(microBatches: readonly Batch[] | BatchSource): Promise<StepResult> {
    const count = "next" in microBatches ? microBatches.count : microBatches.length;
    if (count < 1) throw new Error("step() needs at least one batch");
    const profiler = this.profiler;
    profiler?.beginStep(this.stepCount + 1);
    const dp = this.dataParallel;
    if (dp && !this.stateShared) await this.shareRankZeroState(dp);
    const localValid = "next" in microBatches ? undefined : microBatches.reduce((s, b) => s + countValid(b.targets), 0);
    const totalValid = dp && localValid !== undefined ? await dp.sum(localValid) : localValid;
    // Every micro-batch's gradients accumulate into the f32 gradient buffer.
    this.zeroGradients();
    await this.settleProfiledKernels();
    const lossScale = this.lossScaler?.scale ?? 1;
    this.lastLossScale = lossScale;
    // Each micro-batch's summed loss is copied to a slot of the scalar buffer and read back
    // with the gradient norm (or when the slots are full), so the host issues the next
    // micro-batch without waiting for the device; `pending` holds their denominators.
    let loss = 0;
    const pending: number[] = [];
    const addPending = (slotsRead: Float32Array) => {
      pending.forEach((denominator, j) => (loss += slotsRead[j] / denominator));
      pending.length = 0;
    };
    const { scalars, grads } = this.buffers;
    const readPending = async () => {
      if (pending.length > 0) addPending(await this.readLossSlots(pending.length));
    };
    let auxLoss = 0;
    this.expertLoad?.reset();
    const worldSize = this.config.gradientSync?.worldSize ?? 1;
    for (let i = 0; i < count; i++) {
      const waitStart = profiler?.now();
      const batch = "next" in microBatches ? await microBatches.next() : microBatches[i];
      if (waitStart !== undefined) profiler!.data("next batch", waitStart);
      const valid = totalValid === undefined && dp ? await dp.sum(countValid(batch.targets)) : countValid(batch.targets);
      // The loss is a mean over `denominator` target rows; each row's gradient is 1 / denominator.
      const denominator = totalValid ?? valid * count;
      if (denominator === 0) continue;
      // The last micro-batch hands each gradient bucket to the communicator as backward finishes it.
      const handOff = dp && i === count - 1 ? dp : undefined;
      if (pending.length === LOSS_SLOTS) await readPending();
      // The auxiliary loss is a mean over the micro-batches of every rank.
      if (this.config.model.lora?.dropout) this.compiled.runtime.dropoutSeed = dropoutSeedOf(this.config.seed, this.stepCount, i, this.rank);
      await this.forwardBackward(batch, lossScale / denominator, lossScale / (count * worldSize), pending.length, handOff);
      pending.push(denominator);
      auxLoss += this.lastAuxLoss / (count * worldSize);
      await this.settleProfiledKernels();
    }
    if (dp) {
      await readPending();
      await dp.finish();
      loss = await dp.sum(loss);
      if (this.model.training!.auxLoss !== undefined) auxLoss = await dp.sum(auxLoss);
    }
    const shard = this.sharded?.shard;
    // Sharded: each rank measures the summed gradients it owns, and the ranks add their parts.
    const measured = shard ? { grads: { buffer: grads, byteOffset: 4 * shard.first }, elements: ownedElements(shard) } : { grads, elements: this.stateLayout.bytes / 4 };
    measureGradients(this.kernels, { ...measured, scalars }, this.lossScaler !== undefined);
    await this.settleProfiledKernels();
    await this.backend.download(scalars, new Uint8Array(this.scalarHost, 0, LOSS_SLOTS_OFFSET + 4 * pending.length));
    addPending(this.lossSlotsHost);
    if (shard && dp) {
      const [sumSquares, notFinite] = await dp.sync.allReduceScalars(Float64Array.of(this.sumSquaresHost[0], this.lossScaler ? this.notFiniteHost[0] : 0), "sum");
      this.sumSquaresHost[0] = sumSquares;
      this.notFiniteHost[0] = notFinite > 0 ? 1 : 0;
    }
    const gradNorm = Math.sqrt(this.sumSquaresHost[0]) / lossScale;
    const lr = learningRateAt(this.config.schedule, this.stepCount);
    // Without loss scaling a non-finite gradient norm means non-finite gradients; a non-finite
    // loss means the forward pass itself failed (in f16 too, where scaling cannot help).
    const nonFinite = !Number.isFinite(loss) || (!this.lossScaler && !Number.isFinite(gradNorm));
    const overflowed = this.lossScaler?.update(this.notFiniteHost[0] === 0) ?? false;
    const skipped = overflowed || nonFinite;
    if (skipped) {
      this.skippedSteps++;
    } else {
      // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
      const clip = this.config.optimizer.gradClip;
      const clipScale = clip > 0 ? Math.min(1, clip / (gradNorm + 1e-6)) : 1;
      this.adamw.update(lr, this.stepCount - this.skippedSteps + 1, clipScale / lossScale);
      await this.settleProfiledKernels();
      if (this.sharded && dp) await this.sharded.publish(dp.sync);
    }
    this.stepCount++;
    // The optimizer's calls stay in flight: the next step's host work (its batch, zeroing the
    // gradients, issuing the forward) overlaps them, and the device runs on in issue order.
    // A profiled step waits, so that its times are its own.
    if (profiler) await this.backend.synchronize();
    await profiler?.readDeviceTimes();
    profiler?.endStep();
    const moe = this.expertLoad ? { auxLoss, expertImbalance: this.expertLoad.imbalance() } : {};
    return { loss, gradNorm, lr, tokens: count * this.tokensPerBatch, skipped, nonFinite, ...(this.lossScaler ? { lossScale } : {}), ...moe };
  }

  /**
   * Every rank takes rank 0's weights (the f32 masters under a 16-bit dtype) and
   * AdamW state, so ranks agree however they were initialized or loaded.
   */
  private async shareRankZeroState(dp: DataParallelSync): Promise<void> {
    const { params, m, v } = this.buffers;
    const sw = this.sharded;
    if (sw) {
      // Sharded: rank 0's parameters and, under a 16-bit dtype, its f32 weights, which until the first step
      // the gradient buffer holds whole (init and loads write them there): each rank keeps the masters it
      // owns of them. m and v are each owner's alone (zero, or loaded from the same checkpoint by every rank).
      const { grads } = this.buffers;
      // (When a gather overwrote them, each owner's masters stand, and the all-gather below agrees the ranks.)
      const share = sw.master !== undefined && this.weightsInGradients;
      await dp.broadcastFromRankZero([{ buffer: params, bytes: this.layout.bytes }, ...(share ? [{ buffer: grads, bytes: this.stateLayout.bytes }] : [])]);
      const n = ownedElements(sw.shard);
      if (share && n > 0) this.backend.copy({ buffer: grads, byteOffset: 4 * sw.shard.first }, { buffer: sw.master, byteOffset: 0 }, 4 * n);
      sw.roundOwnedMasters();
      await this.sharded.publish(dp.sync);
      this.stateShared = true;
      return;
    }
    // Under a 16-bit dtype the masters, and the parameters too when some are frozen (they have no master).
    const weights = this.masters
      ? [...(this.hasFrozen ? [{ buffer: params, bytes: this.layout.bytes }] : []), { buffer: this.masters.master, bytes: this.stateLayout.bytes }]
      : [{ buffer: params, bytes: this.layout.bytes }];
    await dp.broadcastFromRankZero([...weights, { buffer: m, bytes: this.stateLayout.bytes }, { buffer: v, bytes: this.stateLayout.bytes }]);
    this.masters?.roundToParams();
    this.stateShared = true;
  }

  /**
   * Profiling on an asynchronous backend: waits for the kernels issued so far and
   * counts the wait on the last one (the optimizer's kernels are issued back to back).
   */
  private async settleProfiledKernels(): Promise<void> {
    const p = this.profiler;
    if (!p?.synchronize || !p.recording) return;
    await p.synchronize();
    p.settleLastKernel();
  }

  /** The first `count` micro-batch loss slots of the scalar buffer, read back (waits for the device). */
  private async readLossSlots(count: number): Promise<Float32Array> {
    await this.backend.download({ buffer: this.buffers.scalars, byteOffset: LOSS_SLOTS_OFFSET }, new Uint8Array(this.scalarHost, LOSS_SLOTS_OFFSET, 4 * count));
    return this.lossSlotsHost;
  }

  /** Zeroes the f32 gradient buffer the graph accumulates parameter gradients into. */
  private zeroGradients(): void {
    zeroGradients(this.kernels, { ...this.buffers, elements: this.stateLayout.bytes / 4 });
  }

  /**
   * Forward and backward of one micro-batch: adds its gradients, each target row
   * weighted by lossScale, to the gradient buffer, and copies its summed row losses
   * to loss slot `slot` of the scalar buffer (read back by step()).
   */
  private async forwardBackward(batch: Batch, lossScale: number, auxScale: number, slot: number, handOff?: DataParallelSync): Promise<void> {
    this.checkBatch(batch);
    this.compiled.runtime.lossScale = lossScale;
    this.compiled.runtime.auxScale = auxScale;
    const p = this.profiler;
    const uploadStart = p?.now();
    uploadDocuments(this.compiled, this.model, batch.docStarts);
    this.compiled.upload(this.model.ids, batch.ids);
    this.compiled.upload(this.model.training!.targets, batch.targets);
    if (uploadStart !== undefined) p!.data("upload", uploadStart);
    if (handOff) await handOff.runHandingOff(this.compiled);
    else if (p?.synchronize && p.recording) await this.compiled.runSynchronized(p, p.synchronize);
    else if (this.config.kernelGraphs && this.microBatchesRun > 0 && !this.dataParallel && !p?.recording) this.compiled.runAsGraph();
    else this.compiled.run();
    this.microBatchesRun++;
    this.backend.copy(this.compiled.operand(this.model.training!.lossSum), { buffer: this.buffers.scalars, byteOffset: LOSS_SLOTS_OFFSET + 4 * slot }, 4);
    const aux = this.model.training!.auxLoss;
    if (aux !== undefined) {
      await this.compiled.download(aux, this.auxLossHost);
      this.lastAuxLoss = this.auxLossHost[0];
      await this.expertLoad?.add(this.compiled);
    }
  }

  /** Whether some parameters are frozen (a LoRA run's base): they have no gradient, optimizer state or master. */
  get hasFrozen(): boolean {
    return this.stateLayout.count < this.layout.count;
  }

  /**
   * Where each parameter's weights live, in the model's order: the f32 master weights of
   * the trained ones under a 16-bit dtype, else the parameters themselves (frozen ones in
   * the training dtype). Checkpoints read and write the weights there.
   */
  weightSlots(): ParamSlot[] {
    const m = this.masters;
    if (!m) return slotsOf(this.layout, this.buffers.params);
    const masters = new Map(slotsOf(this.stateLayout, m.master).map((s) => [s.spec.name, s]));
    return slotsOf(this.layout, this.buffers.params).map((s) => masters.get(s.spec.name) ?? s);
  }

  /** A trained parameter's f32 state in `buffer` (gradients, AdamW's m or v, whole): the state layout's slots. */
  stateSlots(buffer: BufferHandle): ParamSlot[] {
    return slotsOf(this.stateLayout, buffer);
  }

  /** A trained parameter's AdamW m or v (f32, whole), written where this rank keeps it: all of it, or with a sharded optimizer the owned part. */
  writeOptimizerState(which: "m" | "v", spec: ParamSpec, values: Float32Array): void {
    const e0 = this.stateLayout.offsets.get(spec.name)! / 4;
    const buffer = this.buffers[which];
    const shard = this.sharded?.shard;
    if (!shard) return this.backend.upload({ buffer, byteOffset: 4 * e0 }, values);
    const part = ownedPart(shard, e0, 0, values.length);
    if (part) this.backend.upload({ buffer, byteOffset: 4 * part.ownOffset }, values.subarray(part.skip, part.skip + part.n));
  }

  /**
   * Overwrites parameters by name (f32 values), e.g. from a checkpoint or a PyTorch
   * dump. Under a 16-bit dtype they become the master weights, rounded into the parameters.
   */
  loadParameters(values: ReadonlyMap<string, Float32Array>): void {
    for (const slot of this.weightSlots()) {
      const v = values.get(slot.spec.name);
      if (!v) throw new KilnError(`no value for parameter ${slot.spec.name}`, { where: slot.spec.name, hint: "the checkpoint does not match this model" });
      if (v.length !== elementCount(slot.spec.shape)) throw new KilnError(`parameter ${slot.spec.name} has ${v.length} values, the model needs ${elementCount(slot.spec.shape)}`, { where: slot.spec.name });
      this.writeWeights(slot, 0, v);
    }
    this.masters?.roundToParams();
  }

  /**
   * loadParameters from a stream of pieces (a run of one parameter's values each), each
   * uploaded as it comes, so that loading needs only one piece in host memory; every
   * parameter must be covered exactly, but for LoRA adapters left out whole (new ones).
   */
  async loadParametersFrom(pieces: AsyncIterable<ParameterPiece>): Promise<void> {
    const slots = new Map(this.weightSlots().map((s) => [s.spec.name, s]));
    const loaded = new Map([...slots.keys()].map((n) => [n, 0]));
    for await (const p of pieces) {
      const slot = slots.get(p.name);
      if (slot === undefined) continue; // not a parameter of this model: the caller checked its source
      const n = elementCount(slot.spec.shape);
      if (p.elements !== n || p.elementOffset + p.values.length > n) throw new KilnError(`parameter ${p.name} has ${p.elements} values, the model needs ${n}`, { where: p.name });
      this.writeWeights(slot, p.elementOffset, p.values);
      loaded.set(p.name, loaded.get(p.name)! + p.values.length);
    }
    // LoRA adapters the pieces leave out keep their initial values: new adapters on loaded base weights.
    const fresh = (s: { spec: ParamSpec }) => this.config.model.lora !== undefined && !s.spec.frozen && loaded.get(s.spec.name) === 0;
    const short = [...slots.values()].find((s) => loaded.get(s.spec.name) !== elementCount(s.spec.shape) && !fresh(s));
    if (short) throw new KilnError(`no value (or not every value) for parameter ${short.spec.name}`, { where: short.spec.name, hint: "the checkpoint does not match this model" });
    this.masters?.roundToParams();
  }

  /**
   * f32 values into a weight slot from element `first` on, rounded to the slot's dtype when it is 16-bit.
   * With a sharded optimizer under a 16-bit dtype, a trained parameter's values also go to the masters
   * of the elements this rank owns (`spec` says which parameter).
   */
  writeWeights(slot: Pick<ParamSlot, "at" | "dtype"> & { spec?: ParamSpec }, first: number, values: Float32Array): void {
    const sw = this.sharded;
    if (sw?.master && slot.spec && !slot.spec.frozen) {
      const e0 = this.stateLayout.offsets.get(slot.spec.name)! / 4;
      const part = ownedPart(sw.shard, e0, first, values.length);
      if (part) this.backend.upload({ buffer: sw.master, byteOffset: 4 * part.ownOffset }, values.subarray(part.skip, part.skip + part.n));
      // Before the first step the gradient buffer holds the f32 weights whole, for rank 0 to share them.
      if (!this.stateShared && this.weightsInGradients) this.backend.upload({ buffer: this.buffers.grads, byteOffset: 4 * (e0 + first) }, values);
    }
    const width = bytesPerElement(slot.dtype);
    const at = { buffer: slot.at.buffer, byteOffset: slot.at.byteOffset + width * first };
    if (slot.dtype === "f32") return this.backend.upload(at, values);
    const bytes = new Uint8Array(values.length * width);
    encodeElements(values, slot.dtype, bytes);
    this.backend.upload(at, bytes);
  }

  /**
   * Every parameter as f32 values by name: the parameters in the training dtype
   * (widened exactly), their weights (the f32 masters of the trained ones under a 16-bit
   * dtype; the parameters themselves otherwise), or, for the trained parameters alone, the
   * f32 gradients AdamW read last (unscaled under f16) or AdamW's m and v.
   */
  async readParameters(which: "params" | "master" | "grads" | "m" | "v" = "params"): Promise<Map<string, Float32Array>> {
    if (this.sharded && which !== "params" && (which !== "master" || this.sharded.master)) return this.readGathered(which);
    const slots = which === "master" ? this.weightSlots() : which === "params" ? slotsOf(this.layout, this.buffers.params) : this.stateSlots(this.buffers[which]);
    const unscale = which === "grads" ? this.lastLossScale : 1;
    const out = new Map<string, Float32Array>();
    for (const { spec, at, dtype } of slots) {
      const n = elementCount(spec.shape);
      let v: Float32Array;
      if (dtype === "f32") {
        v = new Float32Array(n);
        await this.backend.download(at, v);
      } else {
        const bytes = new Uint8Array(2 * n);
        await this.backend.download(at, bytes);
        v = Float32Array.from(decodeElements(bytes, dtype, n));
      }
      if (unscale !== 1) for (let i = 0; i < n; i++) v[i] /= unscale;
      out.set(spec.name, v);
    }
    return out;
  }

  /**
   * readParameters of a sharded optimizer's state: a collective (every rank calls it) that gathers m, v
   * or the masters whole through the gradient buffer. Gradients are refused: only the owned part is summed.
   */
  private async readGathered(which: "master" | "grads" | "m" | "v"): Promise<Map<string, Float32Array>> {
    if (which === "grads") throw new Error("with a sharded optimizer each rank sums only the gradients it owns: read them from an unsharded trainer");
    const at = await this.gatherOwned(which);
    const out = new Map<string, Float32Array>();
    for (const spec of this.stateLayout.specs) {
      const v = new Float32Array(elementCount(spec.shape));
      await this.backend.download({ buffer: at.buffer, byteOffset: this.stateLayout.offsets.get(spec.name)! }, v);
      out.set(spec.name, v);
    }
    if (which === "master" && this.hasFrozen) {
      // Frozen parameters have no master: their values are the parameters' own, widened exactly.
      for (const [name, v] of await this.readParameters("params")) if (!out.has(name)) out.set(name, v);
    }
    return new Map(this.layout.specs.filter((s) => out.has(s.name)).map((s) => [s.name, out.get(s.name)!]));
  }

  /** Runs forward and backward on one batch without updating; returns its mean loss (readParameters("grads") reads the gradients). */
  async lossAndGradients(batch: Batch): Promise<number> {
    const valid = countValid(batch.targets);
    const lossScale = this.lossScaler?.scale ?? 1;
    this.lastLossScale = lossScale;
    this.zeroGradients();
    if (valid === 0) return 0;
    if (this.config.model.lora?.dropout) this.compiled.runtime.dropoutSeed = dropoutSeedOf(this.config.seed, this.stepCount, 0, this.rank);
    await this.forwardBackward(batch, lossScale / valid, lossScale, 0);
    return (await this.readLossSlots(1))[0] / valid;
  }

  /**
   * A forward-only runner over this trainer's parameters (evaluation, generation). Its
   * activations live in the training arena when they fit there (planForwardMemory with
   * the training plan's activations says what it adds): run it between steps, not
   * while one is under way.
   */
  forwardRunner(batchSize: number, seqLen: number): ForwardRunner {
    return new ForwardRunner(this.backend, this.config.model, this.layout, this.buffers.params, batchSize, seqLen, this.compiled.arena, this.model.docStarts !== undefined);
  }

  dispose(): void {
    this.compiled.dispose();
    this.masters?.dispose();
    this.sharded?.dispose();
    for (const b of Object.values(this.buffers)) this.backend.free(b);
  }

  private checkBatch(b: Batch): void {
    const n = this.tokensPerBatch;
    if (b.ids.length !== n || b.targets.length !== n) {
      throw new Error(`a batch needs ${n} ids and targets (batch ${this.config.batchSize} x seq ${this.config.seqLen}), got ${b.ids.length} and ${b.targets.length}`);
    }
  }
}

/**
 * The dropout seed of micro-batch `micro` of step `step` on `rank` (LoRA dropout): from the run's
 * seed and those alone, so a resumed run draws the masks the uninterrupted one would have.
 */
function dropoutSeedOf(seed: number, step: number, micro: number, rank: number): number {
  let z = dropoutMix((seed ^ 0x9e3779b9) >>> 0);
  for (const part of [step, micro, rank]) z = dropoutMix((z ^ part) >>> 0);
  return z;
}

function countValid(targets: Int32Array): number {
  let n = 0;
  for (let i = 0; i < targets.length; i++) if (targets[i] >= 0) n++;
  return n;
}
