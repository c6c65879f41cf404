import { CheckpointError } from "@kiln/contract";
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

/**
 * Writes weights (Hugging Face names), AdamW m and v, the step and the model
 * config to one safetensors file, atomically. `metadata` adds the caller's
 * state (data cursor, config file, tokenizer).
 */
export async function saveTrainerCheckpoint(trainer: Trainer, path: string, metadata: Record<string, string> = {}): Promise<void> {
  const tensors: SafetensorsTensorInput[] = [];
  const add = (prefix: string, values: Map<string, Float32Array>) => {
    for (const s of trainer.layout.specs) tensors.push({ name: prefix + s.name, dtype: "F32", shape: s.shape, data: values.get(s.name)! });
  };
  add("", await trainer.readParameters("params"));
  add(EXP_AVG, await trainer.readParameters("m"));
  add(EXP_AVG_SQ, await trainer.readParameters("v"));
  await writeSafetensors(path, tensors, {
    ...metadata,
    [META_STEP]: String(trainer.stepCount),
    [META_MODEL]: JSON.stringify(trainer.config.model),
    format: "pt",
  });
}

/**
 * Restores weights, optimizer state and step from a checkpoint written by
 * saveTrainerCheckpoint. Refuses, naming the file and tensor, a checkpoint of
 * another model. Returns the file's metadata.
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
    const { params, m, v } = trainer.stateBuffers;
    for (const [prefix, buffer, layout] of [
      ["", params, trainer.layout],
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
    trainer.stepCount = step;
    await trainer.backend.synchronize();
    return meta;
  } finally {
    await reader.close();
  }
}
