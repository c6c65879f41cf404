import { type Backend, MemoryError, TrainingError } from "@kiln/contract";
import {
  META_BASE_MODEL,
  META_DATA,
  META_DATA_CURSOR,
  META_DATA_CURSORS,
  Prefetcher,
  type RunSettings,
  ignoredKeysWarning,
  errorCode,
  resolveSettings,
  settingWhere,
  TrainingRun,
  loadTrainerCheckpoint,
  type StepResult,
  saveTrainedWeights,
  saveTrainerCheckpoint,
  trainingFlopsPerToken,
} from "@kiln/core";
import type { FloatDType } from "@kiln/contract";
import { trainingPrecision } from "./training-precision.js";
import { loadConfigFile, weightsOnlyConfig } from "../config/load-config.js";
import { settingOverrides } from "../config/setting-flags.js";
import { memoryBandwidthForName } from "../estimate/devices.js";
import { formatBytes } from "../estimate/format-bytes.js";
import { formatBanner } from "./banner.js";
import { checkpointPath, pruneCheckpoints, removeStaleTempFiles, resolveResume } from "./checkpoint-files.js";
import { type CpuPeak, cachedCpuPeakSource, forgetCpuPeak } from "../cpu-peak/cpu-peak.js";
import { modelFlopsUtilization, peakForDtype } from "./mfu.js";
import { lockOutputDir } from "./output-lock.js";
import { StopSignals, exitOnStopSignals } from "./stop-signals.js";
import { checkOutputFolder, checkReuseFlags, moveEarlierRunAside } from "./earlier-run.js";
import { warmupWarning } from "../config/schedule-warnings.js";
import { MetricsLog, type MetricsLine } from "./metrics-log.js";
import { openBackend, trainsOnCuda } from "./open-backend.js";
import { ProgressDisplay } from "./progress-display.js";
import { type TrainingData, openTrainingData } from "./training-data.js";
import { PROFILE_DEFAULT_STEPS, StepProfiling } from "./step-profiling.js";
import { type ModelTokenizer, runTokenizer } from "./run-tokenizer.js";
import { type StartingWeights, closeStartingWeights, openStartingWeights, startingPieces } from "./starting-weights.js";
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
  checkOneRankSync,
  gpuOfRank,
  joinDevice,
  startsRanks,
  threadsPerRank,
} from "./data-parallel-run.js";
import path from "node:path";

/** commander's parsed options of kiln train: the setting flags of core's table by their property names, plus these. */
export interface TrainFlags extends DataParallelFlags {
  [flag: string]: unknown;
  file?: string;
  resume?: string;
  overwrite?: boolean;
  initFrom?: string;
  loraFrom?: string;
  headless?: boolean;
  threads?: number;
  exportDtype?: FloatDType;
  /** --profile [steps]: true without a count. */
  profile?: number | true;
}

/**
 * Trains as the flags and config say; resolves to the process exit code (after a stop signal
 * and the save of the step reached: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP).
 * With --ranks N (and no WORLD_SIZE yet) it starts N ranks of itself and waits for them;
 * a rank (WORLD_SIZE set, by kiln or torchrun) trains its slice of every batch.
 */
export async function runTrain(flags: TrainFlags): Promise<number> {
  const env = rankEnvironment();
  if (env) checkRanksAgree(flags, env);
  const config = flags.file !== undefined ? loadConfigFile(flags.file) : weightsOnlyConfig(flags.initFrom, "train");
  // Weights to start from are opened and checked (model, every tensor) before anything is written.
  const init = await openStartingWeights(flags.initFrom, flags.loraFrom);
  try {
    const s = resolveSettings(config, settingOverrides("train", flags), init && { model: init.model, source: init.weights.modelSource });
    checkDataParallelFlags(flags, s.targetDevice);
    if (flags.gpus) s.targetDevice = "gpu";
    // torchrun's --max_restarts starts every rank again after one failed: they go on from the newest checkpoint.
    if (env?.torchrun && Number(process.env.TORCHELASTIC_RESTART_COUNT ?? 0) > 0) {
      if ((env.rank ?? 0) === 0) stderrLine(`torchrun restart ${process.env.TORCHELASTIC_RESTART_COUNT}: going on from the newest checkpoint in ${s.outputDir} (--resume auto)`);
      flags.resume = "auto";
      flags.overwrite = false;
    }
    const reuse = { resume: flags.resume !== undefined, overwrite: flags.overwrite === true };
    checkReuseFlags(reuse);
    if (!env && startsRanks(flags)) {
      await checkBeforeLaunch(flags, s.targetDevice);
      checkOutputFolder(s.outputDir, reuse);
      return await launchThisCommand(flags, s);
    }
    if (!env || env.worldSize === 1) await checkOneRankSync(flags, s.targetDevice, stderrLine);
    if (flags.maxRestarts !== undefined && !startsRanks(flags) && (env?.rank ?? 0) === 0) {
      stderrLine(`warning: --max-restarts has no effect here: kiln's launcher restarts the ranks it starts (--ranks, --gpus, --nnodes)${env?.torchrun ? "; under torchrun use its --max_restarts" : ""}`);
    }
    // One run per output folder: a second one stops here, before it reads or writes anything there. Rank 0 alone writes there.
    const lock = (env?.rank ?? 0) === 0 ? lockOutputDir(s.outputDir, stderrLine) : undefined;
    // A signal outside the training loop exits at once, the lock released (the loop saves first).
    const stopExits = exitOnStopSignals();
    try {
      return await openAndTrain(s, flags, init, env && env.worldSize > 1 ? env : undefined);
    } finally {
      stopExits();
      lock?.release();
    }
  } finally {
    await closeStartingWeights(init);
  }
}

function stderrLine(text: string): void {
  process.stderr.write(`${text}\n`);
}

async function openAndTrain(s: RunSettings, flags: TrainFlags, init: StartingWeights | undefined, env: RankEnvironment | undefined): Promise<number> {
  // Ranks join first, so that one that cannot start is named before the others do any work.
  const onCuda = env !== undefined && (await trainsOnCuda(s.targetDevice));
  const sync = env ? await chooseSyncBackend(flags, env, onCuda) : undefined;
  const comm = env && sync ? await joinRanks(env, flags, s, sync) : undefined;
  try {
    const data = await openTrainingData(s, comm);
    const threads = flags.threads ?? (env ? threadsPerRank(env) : undefined);
    let cpuPeak: CpuPeak | undefined;
    const { backend, note } = await openBackend(s.targetDevice, {
      targetFrom: targetDeviceSource(s),
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
  init: StartingWeights | undefined,
  ranks: { comm: Communicator; row: string } | undefined,
): Promise<number> {
  const comm = ranks?.comm;
  // Rank 0 alone prints, logs and writes; every rank computes the same losses and weights.
  const lead = !comm || comm.rank === 0;
  const precision = trainingPrecision(s, backend);
  const dtype = precision.dtype;
  const resumeFrom = flags.resume ? await resolveResume(flags.resume, s.outputDir, { moveAside: lead, say: (line) => lead && process.stderr.write(`${line}\n`) }) : undefined;
  // --profile: rank 0 alone times its steps (every rank runs the same kernels).
  const profiling = lead && flags.profile !== undefined ? new StepProfiling(flags.profile === true ? PROFILE_DEFAULT_STEPS : flags.profile, 0, backend, s.outputDir, {
    peakFlops: peakForDtype(backend.capabilities(), dtype),
    memoryBandwidth: memoryBandwidthForName(backend.capabilities().device.name),
  }) : undefined;
  let say = (text: string): void => {
    if (lead) process.stderr.write(`${text}\n`);
  };
  // Every rank takes part in a save (its data cursor goes into the checkpoint); rank 0 writes it.
  // The newest step checkpoints are kept; best.safetensors (--save-best) is replaced, atomically, at each lower val_loss.
  const run: TrainingRun = new TrainingRun({
    settings: s,
    backend,
    dtype,
    data,
    ...(comm ? { ranks: { sync: comm, bucketBytes: Math.max(4, Math.round(s.bucketMb * 2 ** 20)), sumOverRanks: (values) => comm.allReduceScalars(values, "sum") } } : {}),
    ...(profiling ? { profiler: profiling.profiler } : {}),
    ...(s.cudaGraphs && backend.graphs ? { kernelGraphs: true } : {}),
    save: async (kind, metadata) => {
      const cursors = comm ? await gatherCursors(comm, run.prefetcher.getCursor()) : undefined;
      // --shard-optimizer: every rank sends rank 0 its share of the optimizer state.
      const whole = await run.trainer.wholeOptimizerState();
      if (!lead) return;
      const file = kind === "best" ? path.join(s.outputDir, "best.safetensors") : checkpointPath(s.outputDir, run.trainer.stepCount);
      await saveTrainerCheckpoint(run.trainer, file, metadata(cursors), whole);
      if (kind === "step") pruneCheckpoints(s.outputDir, s.maxCheckpoints);
      say(`saved ${file}`);
    },
  });
  const trainer = run.trainer;
  const { plan } = run;
  profiling?.setTotalSteps(run.totalSteps);
  let startedFrom: ModelTokenizer | undefined = init && { metadata: init.weights.metadata, source: init.weights.path };
  try {
    if (lead) {
      // An earlier run's files are never written by a run that did not ask to continue it (checked once
      // the config, the data, the device and the plan have been found sound, so that their errors come first).
      checkOutputFolder(s.outputDir, { resume: resumeFrom !== undefined || flags.resume !== undefined, overwrite: flags.overwrite === true });
      const aside = flags.overwrite ? moveEarlierRunAside(s.outputDir) : undefined;
      if (aside) say(`moved the earlier run in ${s.outputDir} to ${aside}`);
    }
    if (resumeFrom) {
      const meta = await loadTrainerCheckpoint(trainer, resumeFrom);
      startedFrom = { metadata: meta, source: resumeFrom };
      await run.resumed(meta, comm?.rank ?? 0);
    } else if (init) {
      await trainer.loadParametersFrom(startingPieces(init));
    }
    // The data must be in the tokens of the model it trains; checkpoints record that tokenizer.
    const tokenizer = await runTokenizer(data, startedFrom, (text) => lead && process.stderr.write(`${text}\n`));
    // What the data was, for model cards, and its tokenizer.
    // A LoRA run records where its base came from: an exported adapter names it.
    const base = startedFrom?.metadata[META_BASE_MODEL] ?? init?.baseModel;
    const described = { [META_DATA]: s.dataPath ? path.basename(s.dataPath) : "kiln's built-in story corpus", ...tokenizer, ...(s.model.lora && base ? { [META_BASE_MODEL]: base } : {}) };
    run.describe(described);
    if (lead) removeStaleTempFiles(s.outputDir);
    const interactive = !flags.headless && process.stdout.isTTY === true;
    // --resume auto without a checkpoint yet starts at step 0: lines an unsaved earlier start logged go.
    const log = lead ? new MetricsLog(s.outputDir, !interactive, resumeFrom ? trainer.stepCount : flags.resume ? 0 : undefined) : undefined;
    if (lead) {
      const banner = formatBanner(s, backend, trainer.layout.count, { ...plan.memory, recompute: plan.recompute }, data.description, deviceNote, precision.description, run.stepLimit.text);
      // Headless stdout carries only JSON lines: the banner goes to stderr there.
      (interactive ? process.stdout : process.stderr).write(`kiln train ${s.configPath}\n${banner}\n${ranks ? `${ranks.row}\n` : ""}`);
      if (plan.need > 0.9 * plan.available) process.stderr.write(`warning: the plan uses ${((100 * plan.need) / plan.available).toFixed(0)}% of device memory\n`);
      if (s.pack && data.train.packing === undefined) process.stderr.write("warning: trainer.pack (--pack) has no effect on a token file: its rows are windows of one stream; it packs the examples of a chat or instruct file (kiln prepare --format)\n");
      if (s.shardOptimizer && !comm) process.stderr.write("warning: trainer.shard_optimizer (--shard-optimizer) has no effect with one rank: it splits the optimizer state over data-parallel ranks (--ranks, --gpus, --nnodes)\n");
      if (s.cudaGraphs && !backend.graphs) process.stderr.write(`warning: trainer.cuda_graphs (--cuda-graphs) has no effect on ${backend.capabilities().device.name}: only the CUDA backend records graphs\n`);
      const warmup = warmupWarning(s.warmupSteps, run.totalSteps);
      if (warmup) process.stderr.write(`${warmup}\n`);
      const ignored = ignoredKeysWarning(s.ignoredKeys);
      if (ignored) process.stderr.write(`${ignored}\n`);
      if (resumeFrom) (interactive ? process.stdout : process.stderr).write(`resumed from ${resumeFrom} at step ${trainer.stepCount}\n`);
      else if (init) (interactive ? process.stdout : process.stderr).write(`weights from ${init.weights.path}${init.adapter ? `, LoRA adapters from ${init.adapter.path}` : ""} (optimizer state fresh)\n`);
    }
    const display = lead && interactive ? new ProgressDisplay(run.totalSteps, trainer.stepCount) : undefined;
    if (display) say = (text: string) => display.log(text);
    const flopsPerToken = trainingFlopsPerToken(s.model, s.seqLen);
    const peak = peakForDtype(backend.capabilities(), dtype);
    let peakBeaten = false;
    let earlyStop: string | undefined;
    const signals = new StopSignals({
      graceSeconds: s.stopGrace,
      say,
      quitLine: () => (run.lastSaved > 0 ? `the newest checkpoint, of step ${run.lastSaved}, is in ${s.outputDir} (--resume auto)` : "no checkpoint was written yet"),
    });
    // With ranks, only the vote after each step stops the loop: a signal that lands between a rank's
    // vote and its next step must not stop that rank a step before the others.
    let agreedStop = false;
    const stopped = () => (comm ? agreedStop : signals.requested);
    try {
      while (!run.done && !stopped()) {
        profiling?.beforeStep(trainer.stepCount);
        const report = await run.step();
        const table = profiling?.afterStep();
        if (table) say(table);
        const { step, result: r, window } = report;
        if (window) {
          // Each rank's share of the work against its own device's peak.
          const utilization = modelFlopsUtilization((window.tokens / trainer.worldSize) * flopsPerToken, window.seconds, peak);
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
            epoch: window.epoch,
            "it/s": window.steps / window.seconds,
            "tokens/s": window.tokens / window.seconds,
            mfu: utilization.mfu,
            mem_bytes: backend.memoryStats().inUseBytes,
            peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
            ...precisionFields(r),
          };
          log?.write(line);
          display?.update(line);
        } else if (r.skipped) {
          // Every skipped f16 step is logged, on a log interval or not.
          log?.write({ step, loss: r.loss, ...precisionFields(r) });
        }
        if (report.eval) {
          log?.write({ step, val_loss: report.eval.valLoss });
          if (display) display.log(`step ${step}: val_loss ${report.eval.valLoss.toFixed(4)}`);
        }
        earlyStop ??= report.earlyStop;
        if (comm) {
          const vote = await anyRankStops(comm, signals.signal);
          if (vote) {
            signals.stopAsOthers(vote);
            agreedStop = true;
          }
        }
      }
      signals.stepsOver();
      const table = profiling?.finish();
      if (table) say(table);
      await run.finish();
      // A sharded optimizer's f32 masters come from every rank (a 16-bit run's weights exported in f32).
      const exportDtype = flags.exportDtype ?? dtype;
      const whole = !stopped() && exportDtype !== dtype ? await trainer.wholeOptimizerState() : undefined;
      if (!stopped() && lead) {
        const final = path.join(s.outputDir, "final.safetensors");
        await saveTrainedWeights(trainer, final, described, exportDtype, whole);
        say(`wrote ${final}`);
        if (earlyStop !== undefined) say(earlyStop);
      }
    } catch (err) {
      // A full disk before the first checkpoint: the run leaves nothing, so the same command can run again once there is space.
      if (log && !resumeFrom && run.lastSaved === 0 && isDiskFull(err)) {
        log.discard();
        say(`removed this run's metrics.jsonl and TensorBoard file from ${s.outputDir}: no checkpoint holds their steps`);
      }
      throw err;
    } finally {
      signals.dispose();
      display?.stop();
      log?.close();
    }
    return stopped() ? signals.exitCode : 0;
  } finally {
    await run.dispose();
  }
}

/** Where the target device was set: undefined for the flag or the default, else the file's line ("run.yaml:14"). */
function targetDeviceSource(s: RunSettings): { where: string; file: string } | undefined {
  const where = settingWhere(s, "trainer.target_device");
  return where === undefined || s.overridden.has("trainer.target_device") ? undefined : { where, file: s.configPath };
}

/** Whether `err` (or an error it wraps) is a write that found the disk or the quota full. */
function isDiskFull(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    const code = errorCode(e);
    if (code === "ENOSPC" || code === "EDQUOT") return true;
  }
  return false;
}

/** Skip fields: `skipped` when the update was not applied, `nonfinite` when values went NaN/inf; f16's loss scale. */
function precisionFields(r: StepResult): Pick<MetricsLine, "skipped" | "nonfinite" | "loss_scale"> {
  return {
    ...(r.skipped ? { skipped: true } : {}),
    ...(r.nonFinite ? { nonfinite: true } : {}),
    ...(r.lossScale !== undefined ? { loss_scale: r.lossScale } : {}),
  };
}
