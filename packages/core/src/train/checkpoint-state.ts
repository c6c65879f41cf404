import type { FloatDType } from "@kiln/contract";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import { writeSafetensors } from "../checkpoint/safetensors-file.js";
import { restoreTrainerState, trainedWeightsContents, trainerCheckpointContents } from "./checkpoint-contents.js";
import type { Trainer, WholeOptimizerState } from "./trainer.js";

// Checkpoint files: what they hold is checkpoint-contents.ts's (also used without a file system).

/**
 * Writes weights (Hugging Face names), AdamW m and v, the step and the model
 * config to one safetensors file, atomically. The weights are f32: the
 * parameters under f32, the f32 master weights under bf16/f16 (the 16-bit
 * parameters are those rounded). The dtype, skipped steps and f16 loss scaler
 * go in the metadata. `metadata` adds the caller's state (data cursor, config file, tokenizer).
 * With a sharded optimizer, `whole` is the state its ranks gathered (Trainer.wholeOptimizerState).
 */
export async function saveTrainerCheckpoint(trainer: Trainer, path: string, metadata: Record<string, string> = {}, whole?: WholeOptimizerState): Promise<void> {
  const c = await trainerCheckpointContents(trainer, metadata, whole);
  await writeSafetensors(path, c.tensors, c.metadata);
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
    return await restoreTrainerState(trainer, reader, path);
  } finally {
    await reader.close();
  }
}

/**
 * Writes the trained weights alone (Hugging Face names, no optimizer state) in
 * `dtype`: by default the training dtype, so a bf16 run exports its bf16
 * parameters; f32 exports the f32 master weights (with a sharded optimizer, from `whole`). Atomic, like every checkpoint.
 */
export async function saveTrainedWeights(
  trainer: Trainer,
  path: string,
  metadata: Record<string, string> = {},
  dtype: FloatDType = trainer.dtype,
  whole?: WholeOptimizerState,
): Promise<void> {
  const c = await trainedWeightsContents(trainer, metadata, dtype, whole);
  await writeSafetensors(path, c.tensors, c.metadata);
}
