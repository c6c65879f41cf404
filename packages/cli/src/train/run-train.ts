import { type Backend, ConfigError, MemoryError, TrainingError } from "@kiln/contract";
import {
  META_DATA,
  META_DATA_CURSOR,
  META_DATA_CURSORS,
  PretrainedWeights,
  Prefetcher,
  Trainer,
  loadTrainerCheckpoint,
  planForwardMemory,
  planTrainingMemory,
  resolveRecompute,
  type SamplerCursor,
  type StepResult,
  saveTrainedWeights,
  saveTrainerCheckpoint,
  trainingFlopsPerToken,
} from "@kiln/core";
import type { FloatDType } from "@kiln/contract";
import { dtypeFromFlags } from "../config/dtype-choice.js";
import { trainingPrecision } from "./training-precision.js";
import { type ConfigOverrides, type RunSettings, resolveSettings } from "../config/settings.js";
import { type LoadedConfig, loadConfigFile, parseConfigText } from "../config/load-config.js";
import { memoryBandwidthForName } from "../estimate/devices.js";
import { formatBytes } from "../estimate/format-bytes.js";
import { formatBanner } from "./banner.js";
import { checkpointPath, pruneCheckpoints, removeStaleTempFiles, resolveResume } from "./checkpoint-files.js";
import { type CpuPeak, cachedCpuPeakSource, forgetCpuPeak } from "../cpu-peak/cpu-peak.js";
import { modelFlopsUtilization, peakForDtype } from "./mfu.js";
import { lockOutputDir } from "./output-lock.js";
import { warmupWarning } from "../config/schedule-warnings.js";
import { ignoredKeysWarning } from "../config/oxidizr-keys.js";
import { MetricsLog, type MetricsLine } from "./metrics-log.js";
import { openBackend, trainsOnCuda } from "./open-backend.js";
import { ProgressDisplay } from "./progress-display.js";
import { BestValLoss, bestCheckpointPath } from "./best-val-loss.js";
import { evaluate } from "./evaluate.js";
import { type TrainingData, openTrainingData } from "./training-data.js";
import { PROFILE_DEFAULT_STEPS, StepProfiling } from "./step-profiling.js";
import { type ModelTokenizer, runTokenizer } from "./run-tokenizer.js";
import { type Communicator, type RankEnvironment, rankEnvironment } from "@kiln/distributed";
import {
  type DataParallelFlags,
  anyRankStops,
  checkRanksAgree,
  chooseSyncBackend,
  gatherCursors,
  joinRanks,
  launchThisCommand,
  ranksRow,
  checkDataParallelFlags,
  checkBeforeLaunch,
  gpuOfRank,
  joinDevice,
  startsRanks,
  threadsPerRank,
} from "./data-parallel-run.js";
import path from "node:path";

export interface TrainFlags extends ConfigOverrides, DataParallelFlags {
  file?: string;
  resume?: string;
  initFrom?: string;
  headless?: boolean;
  threads?: number;
  bf16?: boolean;
  fp16?: boolean;
  exportDtype?: FloatDType;
  /** --profile [steps]: true without a count. */
  profile?: number | true;
}

/**
 * Trains as the flags and config say; resolves to the process exit code (130 after Ctrl-C).
 * With --ranks N (and no WORLD_SIZE yet) it starts N ranks of itself and waits for them;
 * a rank (WORLD_SIZE set, by kiln or torchrun) trains its slice of every batch.
 */
export async function runTrain(flags: TrainFlags): Promise<number> {
  const env = rankEnvironment();
  if (env) checkRanksAgree(flags, env);
  const asked = dtypeFromFlags(flags);
  const config = flags.file !== undefined ? loadConfigFile(flags.file) : weightsOnlyConfig(flags.initFrom);
  // Weights to start from are opened and checked (model, every tensor) before anything is written.
  const init = flags.initFrom === undefined ? undefined : await PretrainedWeights.open(flags.initFrom);
  try {
    const s = resolveSettings(config, { ...flags, ...(asked ? { dtype: asked.dtype } : {}) }, init && { model: init.model, source: init.modelSource });
    checkDataParallelFlags(flags, s.targetDevice);
    if (flags.gpus) s.targetDevice = "gpu";
    if (!env && startsRanks(flags)) {
      await checkBeforeLaunch(flags, s.targetDevice);
      return await launchThisCommand(flags, s);
    }
    // One run per output folder: a second one stops here, before it reads or writes anything there. Rank 0 alone writes there.
    const lock = (env?.rank ?? 0) === 0 ? lockOutputDir(s.outputDir, stderrLine) : undefined;
    try {
      return await openAndTrain(s, flags, init, env && env.worldSize > 1 ? env : undefined);
    } finally {
      lock?.release();
    }
  } finally {
    await init?.close();
  }
}

/**
 * Without -f: --init-from brings the model, and the trainer takes its defaults and
 * the flags; the run is named after the weights' folder or file.
 */
function weightsOnlyConfig(initFrom: string | undefined): LoadedConfig {
  if (initFrom === undefined) {
    throw new ConfigError("kiln train needs a config file", {
      where: "-f",
      hint: "pass -f config.yaml (models/ has ready ones), or --init-from PATH to take the model from trained weights with default trainer settings",
    });
  }
  return { path: initFrom, config: parseConfigText("{}", initFrom), text: "", ignoredKeys: [] };
}

function stderrLine(text: string): void {
  process.stderr.write(`${text}\n`);
}

async function openAndTrain(s: RunSettings, flags: TrainFlags, init: PretrainedWeights | undefined, env: RankEnvironment | undefined): Promise<number> {
  // Ranks join first, so that one that cannot start is named before the others do any work.
  const onCuda = env !== undefined && (await trainsOnCuda(s.targetDevice));
  const sync = env ? await chooseSyncBackend(flags, env, onCuda) : undefined;
  const comm = env && sync ? await joinRanks(env, flags, s, sync) : undefined;
  try {
    const data = await openTrainingData(s, comm);
    const threads = flags.threads ?? (env ? threadsPerRank(env) : undefined);
    let cpuPeak: CpuPeak | undefined;
    const { backend, note } = await openBackend(s.targetDevice, {
      ...(threads ? { threads } : {}),
      ...(s.tf32 ? { tf32: true } : {}),
      ...(env && onCuda ? { device: gpuOfRank(flags, env) } : {}),
      // Rank 0 alone reports MFU, so it alone measures the CPU's peak.
      ...(!comm || comm.rank === 0 ? { cpuPeak: cachedCpuPeakSource(stderrLine, (p) => (cpuPeak = p)) } : {}),
    });
    try {
      if (comm) await joinDevice(comm, backend, s);
      const ranks = comm && env ? { comm, row: ranksRow(comm, s, threads ?? 1, `${flags.masterAddr ?? env.masterAddr}:${flags.masterPort ?? env.masterPort}`, sync!.why) } : undefined;
      return await trainOn(s, flags, data, backend, note, cpuPeak, init, ranks);
    } finally {
      backend.dispose();
      await data.dataset.close();
    }
  } finally {
    await comm?.close();
  }
}

async function trainOn(
  s: RunSettings,
  flags: TrainFlags,
  data: TrainingData,
  backend: Backend,
  deviceNote: string | undefined,
  cpuPeak: CpuPeak | undefined,
  init: PretrainedWeights | undefined,
  ranks: { comm: Communicator; row: string } | undefined,
): Promise<number> {
  const comm = ranks?.comm;
  // Rank 0 alone prints, logs and writes; every rank computes the same losses and weights.
  const lead = !comm || comm.rank === 0;
  const precision = trainingPrecision(s, backend, dtypeFromFlags(flags)?.flag);
  const dtype = precision.dtype;
  const recompute = resolveRecompute(s.recompute, s.model, s.batchSize, s.seqLen, dtype, backend.capabilities().device);
  const training = planTrainingMemory(s.model, s.batchSize, s.seqLen, dtype, recompute, backend.capabilities().device.kind);
  // Evaluation runs between steps in the training arena: it adds its I/O (and its own arena only if the training one is smaller).
  const plan = { ...training, evaluation: planForwardMemory(s.model, s.batchSize, s.seqLen, dtype, training.activations) };
  const available = backend.capabilities().device.memoryBytes;
  const need = plan.total + plan.evaluation;
  if (need > available) {
    throw new MemoryError(`training needs ${formatBytes(need)} but ${backend.capabilities().device.name} has ${formatBytes(available)}`, {
      where: s.configPath,
      hint: `lower --batch-size (now ${s.batchSize}) or --seq-len (now ${s.seqLen}) and raise --grad-accum to keep tokens per step; see kiln estimate -f ${s.configPath}`,
    });
  }
  const resumeFrom = flags.resume ? resolveResume(flags.resume, s.outputDir) : undefined;
  const totalSteps = s.maxSteps ?? Math.ceil(((s.numEpochs ?? 1) * data.train.batchesPerEpoch) / s.gradAccum);
  // --profile: rank 0 alone times its steps (every rank runs the same kernels).
  const profiling =
    lead && flags.profile !== undefined
      ? new StepProfiling(flags.profile === true ? PROFILE_DEFAULT_STEPS : flags.profile, totalSteps, backend, s.outputDir, {
          peakFlops: peakForDtype(backend.capabilities(), dtype),
          memoryBandwidth: memoryBandwidthForName(backend.capabilities().device.name),
        })
      : undefined;
  const trainer = new Trainer(backend, {
    model: s.model,
    batchSize: s.batchSize,
    seqLen: s.seqLen,
    optimizer: { beta1: s.beta1, beta2: s.beta2, eps: s.eps, weightDecay: s.weightDecay, gradClip: s.gradClip },
    schedule: { kind: s.schedule, peak: s.lr, min: s.minLr, warmupSteps: s.warmupSteps, maxSteps: totalSteps },
    seed: s.seed,
    recompute,
    dtype,
    loadBalanceAlpha: s.loadBalanceAlpha,
    ...(comm ? { gradientSync: comm, bucketBytes: s.bucketBytes } : {}),
    ...(profiling ? { profiler: profiling.profiler } : {}),
    ...(s.cudaGraphs && backend.graphs ? { kernelGraphs: true } : {}),
  });
  let startedFrom: ModelTokenizer | undefined = init && { metadata: init.metadata, source: init.path };
  let bestVal = new BestValLoss(s.earlyStop);
  if (resumeFrom) {
    const meta = await loadTrainerCheckpoint(trainer, resumeFrom);
    startedFrom = { metadata: meta, source: resumeFrom };
    bestVal = new BestValLoss(s.earlyStop, meta);
    const cursors = meta[META_DATA_CURSORS] ? (JSON.parse(meta[META_DATA_CURSORS]) as SamplerCursor[]) : undefined;
    const cursor = cursors?.[comm?.rank ?? 0] ?? (meta[META_DATA_CURSOR] ? (JSON.parse(meta[META_DATA_CURSOR]) as SamplerCursor) : undefined);
    if (cursor) data.train.setCursor(cursor);
  } else if (init) {
    await trainer.loadParametersFrom(init.pieces());
  }
  // The data must be in the tokens of the model it trains; checkpoints record that tokenizer.
  const tokenizer = await runTokenizer(data, startedFrom, (text) => lead && process.stderr.write(`${text}\n`));
  if (lead) removeStaleTempFiles(s.outputDir);
  const runner = trainer.forwardRunner(s.batchSize, s.seqLen);
  const interactive = !flags.headless && process.stdout.isTTY === true;
  const log = lead ? new MetricsLog(s.outputDir, !interactive, resumeFrom ? trainer.stepCount : undefined) : undefined;
  if (lead) {
    const banner = formatBanner(s, backend, trainer.layout.count, { ...plan, recompute }, data.description, deviceNote, precision.description);
    // Headless stdout carries only JSON lines: the banner goes to stderr there.
    (interactive ? process.stdout : process.stderr).write(`kiln train ${s.configPath}\n${banner}\n${ranks ? `${ranks.row}\n` : ""}`);
    if (need > 0.9 * available) process.stderr.write(`warning: the plan uses ${((100 * need) / available).toFixed(0)}% of device memory\n`);
    if (s.cudaGraphs && !backend.graphs) process.stderr.write(`warning: trainer.cuda_graphs (--cuda-graphs) has no effect on ${backend.capabilities().device.name}: only the CUDA backend records graphs\n`);
    const warmup = warmupWarning(s.warmupSteps, totalSteps);
    if (warmup) process.stderr.write(`${warmup}\n`);
    const ignored = ignoredKeysWarning(s.ignoredKeys);
    if (ignored) process.stderr.write(`${ignored}\n`);
    if (resumeFrom) (interactive ? process.stdout : process.stderr).write(`resumed from ${resumeFrom} at step ${trainer.stepCount}\n`);
    else if (init) (interactive ? process.stdout : process.stderr).write(`weights from ${init.path} (optimizer state fresh)\n`);
  }

  const prefetcher = new Prefetcher(data.train, Math.max(1, s.prefetch));
  const display = lead && interactive ? new ProgressDisplay(totalSteps, trainer.stepCount) : undefined;
  const say = (text: string) => lead && (display ? display.log(text) : process.stderr.write(`${text}\n`));
  const sumOverRanks = comm && ((values: Float64Array) => comm.allReduceScalars(values, "sum"));
  const flopsPerToken = trainingFlopsPerToken(s.model, s.seqLen);
  const peak = peakForDtype(backend.capabilities(), dtype);
  let peakBeaten = false;
  // What the data was, for model cards, and its tokenizer.
  const described = () => ({ [META_DATA]: s.dataPath ? path.basename(s.dataPath) : "kiln's built-in story corpus", ...tokenizer });
  const metadata = (cursors: SamplerCursor[]) => ({
    [META_DATA_CURSOR]: JSON.stringify(prefetcher.getCursor()),
    [META_DATA_CURSORS]: JSON.stringify(cursors),
    "kiln.config": s.configText,
    ...bestVal.metadata(),
    ...described(),
  });
  // Every rank takes part (its data cursor goes into the checkpoint); rank 0 writes it.
  // The newest step checkpoints are kept; best.safetensors (--save-best) is replaced, atomically, at each lower val_loss.
  const save = async (file = checkpointPath(s.outputDir, trainer.stepCount)) => {
    const cursors = comm ? await gatherCursors(comm, prefetcher.getCursor()) : [prefetcher.getCursor()];
    if (!lead) return;
    await saveTrainerCheckpoint(trainer, file, metadata(cursors));
    pruneCheckpoints(s.outputDir, s.maxCheckpoints);
    say(`saved ${file}`);
  };

  let stop = false;
  // --early-stop: the line that ends the run's output, once it has stopped.
  let earlyStop: string | undefined;
  const onSigint = () => {
    if (stop) process.exit(130);
    stop = true;
    say("stopping after this step (Ctrl-C again to quit at once)");
  };
  process.on("SIGINT", onSigint);
  let lastSaved = trainer.stepCount;
  let lastFinite: { step: number; loss: number } | undefined;
  try {
    let windowStart = performance.now();
    let windowSteps = 0;
    let windowTokens = 0;
    while (trainer.stepCount < totalSteps && !stop && earlyStop === undefined) {
      profiling?.beforeStep(trainer.stepCount);
      const r = await trainer.step({ count: s.gradAccum, next: () => prefetcher.next() });
      const table = profiling?.afterStep();
      if (table) say(table);
      windowSteps++;
      windowTokens += r.tokens * trainer.worldSize;
      const step = trainer.stepCount;
      if (r.nonFinite && s.onNonFinite === "stop") throw nonFiniteError(s, step, lastFinite, lastSaved);
      if (!r.nonFinite) lastFinite = { step, loss: r.loss };
      if (step % s.logInterval === 0 || step === totalSteps) {
        const seconds = (performance.now() - windowStart) / 1000;
        const tokensPerSecond = windowTokens / seconds;
        // Each rank's share of the work against its own device's peak.
        const utilization = modelFlopsUtilization((windowTokens / trainer.worldSize) * flopsPerToken, seconds, peak);
        if (utilization.beatPeak && !peakBeaten) {
          peakBeaten = true;
          if (cpuPeak) forgetCpuPeak(cpuPeak);
          say(`warning: training ran faster than the device's peak FLOP/s figure${cpuPeak ? ` (measured ${cpuPeak.measuredAt}, likely while the machine was busy; it is measured again next run)` : ""}; MFU is shown as at most 1`);
        }
        const line: MetricsLine = {
          step,
          loss: r.loss,
          grad_norm: r.gradNorm,
          ...(r.auxLoss === undefined ? {} : { aux_loss: r.auxLoss, expert_imbalance: r.expertImbalance }),
          learning_rate: r.lr,
          epoch: prefetcher.epochProgress,
          "it/s": windowSteps / seconds,
          "tokens/s": tokensPerSecond,
          mfu: utilization.mfu,
          mem_bytes: backend.memoryStats().inUseBytes,
          peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
          ...precisionFields(r),
        };
        log?.write(line);
        display?.update(line);
        windowStart = performance.now();
        windowSteps = 0;
        windowTokens = 0;
      } else if (r.skipped) {
        // Every skipped f16 step is logged, on a log interval or not.
        log?.write({ step, loss: r.loss, ...precisionFields(r) });
      }
      if (step % s.evalInterval === 0 || step === totalSteps) {
        const valLoss = await evaluate(runner, data.val, s.evalIters, sumOverRanks);
        log?.write({ step, val_loss: valLoss });
        if (display) display.log(`step ${step}: val_loss ${valLoss.toFixed(4)}`);
        // Every rank has the same val_loss, so every rank takes the same turns here.
        const verdict = bestVal.record(step, valLoss);
        if (verdict.improved && s.saveBest) await save(bestCheckpointPath(s.outputDir));
        if (verdict.stop) earlyStop = bestVal.stopLine(step);
      }
      if (step % s.saveInterval === 0) {
        await save();
        lastSaved = step;
      }
      if (comm) stop = await anyRankStops(comm, stop);
    }
    const table = profiling?.finish();
    if (table) say(table);
    if (trainer.stepCount !== lastSaved) await save();
    if (!stop && lead) {
      const final = path.join(s.outputDir, "final.safetensors");
      await saveTrainedWeights(trainer, final, described(), flags.exportDtype ?? dtype);
      say(`wrote ${final}`);
      if (earlyStop !== undefined) say(earlyStop);
    }
  } finally {
    process.off("SIGINT", onSigint);
    display?.stop();
    log?.close();
    await prefetcher.close();
    runner.dispose();
    trainer.dispose();
  }
  return stop ? 130 : 0;
}

/** Skip fields: `skipped` when the update was not applied, `nonfinite` when values went NaN/inf; f16's loss scale. */
function precisionFields(r: StepResult): Pick<MetricsLine, "skipped" | "nonfinite" | "loss_scale"> {
  return {
    ...(r.skipped ? { skipped: true } : {}),
    ...(r.nonFinite ? { nonfinite: true } : {}),
    ...(r.lossScale !== undefined ? { loss_scale: r.lossScale } : {}),
  };
}

/**
 * The run stops at a NaN or infinite loss or gradients (before the update and before any
 * checkpoint of that step): what went wrong, the last finite loss, and what to try.
 */
function nonFiniteError(s: RunSettings, step: number, lastFinite: { step: number; loss: number } | undefined, lastSaved: number): TrainingError {
  const last = lastFinite ? `; the last finite loss was ${lastFinite.loss.toPrecision(5)} at step ${lastFinite.step}` : "";
  const kept = lastSaved > 0 ? `checkpoints up to step ${lastSaved} in ${s.outputDir} are untouched (resume with --resume auto)` : "no checkpoint was written";
  return new TrainingError(`the loss or the gradients became NaN or infinite at step ${step}${last}`, {
    where: `${s.configPath} (step ${step})`,
    hint:
      `lower the learning rate (now ${s.lr}), keep gradient clipping on (trainer.grad_clip, now ${s.gradClip}), or train in f32 or bf16 rather than f16; ` +
      `--on-nonfinite skip skips such steps instead; ${kept}`,
  });
}
