import { CheckpointError, type FloatDType, encodeToBytes, isFloatDType } from "@kiln/contract";
import { toSafetensorsDType } from "../checkpoint/safetensors-dtype.js";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import { writeSafetensors } from "../checkpoint/safetensors-file.js";
import type { SafetensorsTensorInput } from "../checkpoint/safetensors-layout.js";
import { elementCount } from "../graph/tensor.js";
import type { Trainer } from "./trainer.js";

/** Optimizer state tensor names: torch.optim.AdamW's state keys under the parameter's name. */
export const EXP_AVG = "optimizer.exp_avg.";
export const EXP_AVG_SQ = "optimizer.exp_avg_sq.";

/** Metadata keys every kiln checkpoint carries. */
export const META_STEP = "kiln.step";
export const META_MODEL = "kiln.model";
/** The tokenizer the training data was prepared with: a built-in name or a folder tokenizer's identity (tokenizer-files.ts). */
export const META_TOKENIZER = "kiln.tokenizer";
/** A folder tokenizer's files (a JSON object, file name -> text): sampling and export need no other copy. */
export const META_TOKENIZER_FILES = "kiln.tokenizer_files";
/** What the run trained on (a file, or the built-in corpus), for model cards. */
export const META_DATA = "kiln.data";
/** The dtype the run trained in (its tensors here are f32 either way: master weights under bf16/f16). */
export const META_DTYPE = "kiln.dtype";
/** Steps whose update was skipped: f16 overflow or non-finite values (AdamW's bias correction counts applied updates only). */
export const META_SKIPPED_STEPS = "kiln.skipped_steps";
/** f16: the dynamic loss scaler's scale and its finite steps since the scale last changed. */
export const META_LOSS_SCALE = "kiln.loss_scale";
export const META_LOSS_SCALE_GOOD_STEPS = "kiln.loss_scale_good_steps";
/** Data-parallel ranks that trained the run (absent: 1). A run resumes only with as many. */
export const META_WORLD_SIZE = "kiln.world_size";
/** Where the training data stands: the sampler's cursor ({epoch, index}, over every rank's windows). */
export const META_DATA_CURSOR = "kiln.data_cursor";
/** The data cursor of every rank, by rank (JSON array): each rank resumes from its own. */
export const META_DATA_CURSORS = "kiln.data_cursors";
/** The run's lowest val_loss so far and its step (JSON {step, loss}), and the evaluations since: --save-best and --early-stop go on after --resume. */
export const META_BEST_VAL_LOSS = "kiln.best_val_loss";
export const META_EVALS_SINCE_BEST = "kiln.evals_since_best";

/**
 * Writes weights (Hugging Face names), AdamW m and v, the step and the model
 * config to one safetensors file, atomically. The weights are f32: the
 * parameters under f32, the f32 master weights under bf16/f16 (the 16-bit
 * parameters are those rounded). The dtype, skipped steps and f16 loss scaler
 * go in the metadata. `metadata` adds the caller's state (data cursor, config file, tokenizer).
 */
export async function saveTrainerCheckpoint(trainer: Trainer, path: string, metadata: Record<string, string> = {}): Promise<void> {
  const tensors: SafetensorsTensorInput[] = [];
  const add = (prefix: string, values: Map<string, Float32Array>) => {
    for (const s of trainer.layout.specs) tensors.push({ name: prefix + s.name, dtype: "F32", shape: s.shape, data: values.get(s.name)! });
  };
  add("", await trainer.readParameters("master"));
  add(EXP_AVG, await trainer.readParameters("m"));
  add(EXP_AVG_SQ, await trainer.readParameters("v"));
  await writeSafetensors(path, tensors, {
    ...metadata,
    [META_STEP]: String(trainer.stepCount),
    [META_MODEL]: JSON.stringify(trainer.config.model),
    [META_DTYPE]: trainer.dtype,
    [META_SKIPPED_STEPS]: String(trainer.skippedSteps),
    [META_WORLD_SIZE]: String(trainer.worldSize),
    ...(trainer.lossScaler
      ? { [META_LOSS_SCALE]: String(trainer.lossScaler.scale), [META_LOSS_SCALE_GOOD_STEPS]: String(trainer.lossScaler.goodSteps) }
      : {}),
    format: "pt",
  });
}

/**
 * Restores weights (master weights under bf16/f16, rounded into the parameters),
 * optimizer state, step, skipped steps and the f16 loss scaler from a checkpoint
 * written by saveTrainerCheckpoint. A checkpoint of another dtype loads too (its
 * f32 weights become this run's); an f16 scaler starts afresh from one without
 * scaler state. Refuses, naming the file and tensor, a checkpoint of another
 * model, or one trained by another number of data-parallel ranks. Returns the file's metadata.
 */
export async function loadTrainerCheckpoint(trainer: Trainer, path: string): Promise<Record<string, string>> {
  const reader = await openSafetensors(path);
  try {
    const meta = reader.metadata;
    const step = Number(meta[META_STEP]);
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new CheckpointError(`metadata ${META_STEP} is ${JSON.stringify(meta[META_STEP])}, not a step count`, {
        where: path,
        hint: "this file was not written by kiln train; pass a kiln checkpoint to --resume",
      });
    }
    const counter = (key: string, fallback: number, max = Number.MAX_SAFE_INTEGER) => {
      if (meta[key] === undefined) return fallback;
      const n = Number(meta[key]);
      if (!Number.isSafeInteger(n) || n < 0 || n > max) {
        throw new CheckpointError(`metadata ${key} is ${JSON.stringify(meta[key])}, not a count from 0 to ${max}`, { where: path, hint: "the checkpoint is damaged; resume from an earlier one" });
      }
      return n;
    };
    if (meta[META_DTYPE] !== undefined && !isFloatDType(meta[META_DTYPE] as never)) {
      throw new CheckpointError(`metadata ${META_DTYPE} is ${JSON.stringify(meta[META_DTYPE])}, not f32, bf16 or f16`, { where: path, hint: "the checkpoint is damaged; resume from an earlier one" });
    }
    const skippedSteps = counter(META_SKIPPED_STEPS, 0, step);
    const worldSize = counter(META_WORLD_SIZE, 1);
    if (worldSize !== trainer.worldSize) {
      throw new CheckpointError(`the checkpoint was trained by ${worldSize} data-parallel rank${worldSize === 1 ? "" : "s"}, this run has ${trainer.worldSize}`, {
        where: path,
        hint: `resume with ${worldSize} rank${worldSize === 1 ? "" : "s"} (--ranks ${worldSize}), so each step sees the same global batch; or start a new run from its weights with --init-from`,
      });
    }
    const scale = meta[META_LOSS_SCALE] === undefined ? undefined : Number(meta[META_LOSS_SCALE]);
    if (scale !== undefined && !(scale > 0 && Number.isFinite(scale))) {
      throw new CheckpointError(`metadata ${META_LOSS_SCALE} is ${JSON.stringify(meta[META_LOSS_SCALE])}, not a positive number`, { where: path, hint: "the checkpoint is damaged; resume from an earlier one" });
    }
    const goodSteps = counter(META_LOSS_SCALE_GOOD_STEPS, 0);
    const { params, master, m, v } = trainer.stateBuffers;
    for (const [prefix, buffer, layout] of [
      ["", master ?? params, master ? trainer.stateLayout : trainer.layout],
      [EXP_AVG, m, trainer.stateLayout],
      [EXP_AVG_SQ, v, trainer.stateLayout],
    ] as const) {
      for (const s of layout.specs) {
        const name = prefix + s.name;
        if (!reader.has(name)) {
          throw new CheckpointError(`tensor ${name} is missing`, { where: path, hint: "the checkpoint belongs to another model or is not a training checkpoint" });
        }
        const info = reader.info(name);
        if (info.dtype !== "F32" || info.shape.join(",") !== s.shape.join(",")) {
          throw new CheckpointError(`tensor ${name} is ${info.dtype} [${info.shape}], the model needs F32 [${s.shape}]`, {
            where: path,
            hint: "resume with the model config the checkpoint was trained with",
          });
        }
        const { data } = await reader.read(name);
        if (data.byteLength !== elementCount(s.shape) * 4) throw new CheckpointError(`tensor ${name} has the wrong size`, { where: path });
        trainer.backend.upload({ buffer, byteOffset: layout.offsets.get(s.name)! }, data);
      }
    }
    trainer.roundMastersToParams();
    trainer.stepCount = step;
    trainer.skippedSteps = skippedSteps;
    if (trainer.lossScaler && scale !== undefined) trainer.lossScaler.state = { scale, goodSteps };
    await trainer.backend.synchronize();
    return meta;
  } finally {
    await reader.close();
  }
}

/**
 * Writes the trained weights alone (Hugging Face names, no optimizer state) in
 * `dtype`: by default the training dtype, so a bf16 run exports its bf16
 * parameters; f32 exports the f32 master weights. Atomic, like every checkpoint.
 */
export async function saveTrainedWeights(trainer: Trainer, path: string, metadata: Record<string, string> = {}, dtype: FloatDType = trainer.dtype): Promise<void> {
  const masters = await trainer.readParameters("master");
  // The 16-bit parameters are their masters rounded to nearest even, as encodeToBytes rounds.
  const tensors: SafetensorsTensorInput[] = trainer.layout.specs.map((s) => ({
    name: s.name,
    dtype: toSafetensorsDType(dtype),
    shape: s.shape,
    data: dtype === "f32" ? masters.get(s.name)! : encodeToBytes(masters.get(s.name)!, dtype),
  }));
  await writeSafetensors(path, tensors, {
    ...metadata,
    [META_STEP]: String(trainer.stepCount),
    [META_MODEL]: JSON.stringify(trainer.config.model),
    [META_DTYPE]: dtype,
    format: "pt",
  });
}
