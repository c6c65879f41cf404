import { type Backend, ConfigError, MemoryError } from "@kiln/contract";
import {
  Prefetcher,
  Trainer,
  loadTrainerCheckpoint,
  planForwardMemory,
  planTrainingMemory,
  saveTrainerCheckpoint,
  trainingFlopsPerToken,
  writeSafetensors,
} from "@kiln/core";
import { type ConfigOverrides, type RunSettings, resolveSettings } from "../config/settings.js";
import { loadConfigFile } from "../config/load-config.js";
import { formatBytes } from "../estimate/format-bytes.js";
import { formatBanner } from "./banner.js";
import { checkpointPath, ensureWritableDir, pruneCheckpoints, removeStaleTempFiles, resolveResume } from "./checkpoint-files.js";
import { MetricsLog, type MetricsLine } from "./metrics-log.js";
import { openBackend } from "./open-backend.js";
import { ProgressDisplay } from "./progress-display.js";
import { evaluate } from "./evaluate.js";
import { type TrainingData, openTrainingData } from "./training-data.js";
import path from "node:path";

export interface TrainFlags extends ConfigOverrides {
  file: string;
  resume?: string;
  maxCheckpoints: number;
  headless?: boolean;
  gpus?: string;
  syncBackend?: string;
  threads?: number;
}

/** Trains as the flags and config say; resolves to the process exit code (130 after Ctrl-C). */
export async function runTrain(flags: TrainFlags): Promise<number> {
  if (flags.gpus !== undefined || flags.syncBackend !== undefined) {
    throw new ConfigError("data-parallel training across several devices is not available yet", {
      where: flags.gpus !== undefined ? "--gpus" : "--sync-backend",
      hint: "train on one device: drop --gpus and --sync-backend",
    });
  }
  const s = resolveSettings(loadConfigFile(flags.file), flags);
  if (s.dtype !== "f32") {
    throw new ConfigError(`training in ${s.dtype} is not available yet`, { where: flags.dtype ? "--dtype" : `${s.configPath} (trainer.dtype)`, hint: "use --dtype f32" });
  }
  const data = await openTrainingData(s);
  const { backend, note } = await openBackend(s.targetDevice, { ...(flags.threads ? { threads: flags.threads } : {}) });
  try {
    return await trainOn(s, flags, data, backend, note);
  } finally {
    backend.dispose();
    await data.dataset.close();
  }
}

async function trainOn(s: RunSettings, flags: TrainFlags, data: TrainingData, backend: Backend, deviceNote: string | undefined): Promise<number> {
  const plan = { ...planTrainingMemory(s.model, s.batchSize, s.seqLen, "f32", s.recompute), evaluation: planForwardMemory(s.model, s.batchSize, s.seqLen) };
  const available = backend.capabilities().device.memoryBytes;
  const need = plan.total + plan.evaluation;
  if (need > available) {
    throw new MemoryError(`training needs ${formatBytes(need)} but ${backend.capabilities().device.name} has ${formatBytes(available)}`, {
      where: s.configPath,
      hint: `lower --batch-size (now ${s.batchSize}) or --seq-len (now ${s.seqLen}) and raise --grad-accum to keep tokens per step; see kiln estimate -f ${s.configPath}`,
    });
  }
  const resumeFrom = flags.resume ? resolveResume(flags.resume, s.outputDir) : undefined;
  const trainer = new Trainer(backend, {
    model: s.model,
    batchSize: s.batchSize,
    seqLen: s.seqLen,
    optimizer: { beta1: s.beta1, beta2: s.beta2, eps: s.eps, weightDecay: s.weightDecay, gradClip: s.gradClip },
    schedule: { kind: s.schedule, peak: s.lr, min: s.minLr, warmupSteps: s.warmupSteps, maxSteps: s.maxSteps ?? Math.ceil(((s.numEpochs ?? 1) * data.train.batchesPerEpoch) / s.gradAccum) },
    seed: s.seed,
    recompute: s.recompute,
  });
  if (resumeFrom) {
    const meta = await loadTrainerCheckpoint(trainer, resumeFrom);
    if (meta["kiln.data_cursor"]) data.train.setCursor(JSON.parse(meta["kiln.data_cursor"]));
  }
  ensureWritableDir(s.outputDir);
  removeStaleTempFiles(s.outputDir);
  const runner = trainer.forwardRunner(s.batchSize, s.seqLen);
  const totalSteps = s.maxSteps ?? Math.ceil(((s.numEpochs ?? 1) * data.train.batchesPerEpoch) / s.gradAccum);
  const interactive = !flags.headless && process.stdout.isTTY === true;
  const log = new MetricsLog(s.outputDir, !interactive, resumeFrom ? trainer.stepCount : undefined);
  const banner = formatBanner(s, backend, trainer.layout.count, plan, data.description, deviceNote);
  // Headless stdout carries only JSON lines: the banner goes to stderr there.
  (interactive ? process.stdout : process.stderr).write(`kiln train ${s.configPath}\n${banner}\n`);
  if (need > 0.9 * available) process.stderr.write(`warning: the plan uses ${((100 * need) / available).toFixed(0)}% of device memory\n`);
  if (resumeFrom) (interactive ? process.stdout : process.stderr).write(`resumed from ${resumeFrom} at step ${trainer.stepCount}\n`);

  const prefetcher = new Prefetcher(data.train, Math.max(1, s.prefetch));
  const display = interactive ? new ProgressDisplay(totalSteps, trainer.stepCount) : undefined;
  const say = (text: string) => (display ? display.log(text) : process.stderr.write(`${text}\n`));
  const flopsPerToken = trainingFlopsPerToken(s.model, s.seqLen);
  const peak = backend.capabilities().peakFlops.f32;
  const metadata = () => ({
    "kiln.data_cursor": JSON.stringify(prefetcher.getCursor()),
    "kiln.config": s.configText,
    ...(data.tokenizer ? { "kiln.tokenizer": data.tokenizer } : {}),
  });
  const save = async () => {
    const file = checkpointPath(s.outputDir, trainer.stepCount);
    await saveTrainerCheckpoint(trainer, file, metadata());
    pruneCheckpoints(s.outputDir, flags.maxCheckpoints);
    say(`saved ${file}`);
  };

  let stop = false;
  const onSigint = () => {
    if (stop) process.exit(130);
    stop = true;
    say("stopping after this step (Ctrl-C again to quit at once)");
  };
  process.on("SIGINT", onSigint);
  let lastSaved = trainer.stepCount;
  try {
    let windowStart = performance.now();
    let windowSteps = 0;
    let windowTokens = 0;
    while (trainer.stepCount < totalSteps && !stop) {
      const r = await trainer.step({ count: s.gradAccum, next: () => prefetcher.next() });
      windowSteps++;
      windowTokens += r.tokens;
      const step = trainer.stepCount;
      if (step % s.logInterval === 0 || step === totalSteps) {
        const seconds = (performance.now() - windowStart) / 1000;
        const tokensPerSecond = windowTokens / seconds;
        const line: MetricsLine = {
          step,
          loss: r.loss,
          grad_norm: r.gradNorm,
          learning_rate: r.lr,
          epoch: prefetcher.epochProgress,
          "it/s": windowSteps / seconds,
          "tokens/s": tokensPerSecond,
          mfu: peak ? (tokensPerSecond * flopsPerToken) / peak : null,
          mem_bytes: backend.memoryStats().inUseBytes,
        };
        log.write(line);
        display?.update(line);
        windowStart = performance.now();
        windowSteps = 0;
        windowTokens = 0;
      }
      if (step % s.evalInterval === 0 || step === totalSteps) {
        const valLoss = await evaluate(runner, data.val, s.evalIters);
        log.write({ step, val_loss: valLoss });
        if (display) display.log(`step ${step}: val_loss ${valLoss.toFixed(4)}`);
      }
      if (step % s.saveInterval === 0) {
        await save();
        lastSaved = step;
      }
    }
    if (trainer.stepCount !== lastSaved) await save();
    if (!stop) {
      const final = path.join(s.outputDir, "final.safetensors");
      const params = await trainer.readParameters();
      await writeSafetensors(
        final,
        trainer.layout.specs.map((p) => ({ name: p.name, dtype: "F32" as const, shape: p.shape, data: params.get(p.name)! })),
        { format: "pt", "kiln.model": JSON.stringify(s.model), "kiln.step": String(trainer.stepCount), ...(data.tokenizer ? { "kiln.tokenizer": data.tokenizer } : {}) },
      );
      say(`wrote ${final}`);
    }
  } finally {
    process.off("SIGINT", onSigint);
    display?.stop();
    log.close();
    await prefetcher.close();
    runner.dispose();
    trainer.dispose();
  }
  return stop ? 130 : 0;
}
