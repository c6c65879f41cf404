import { CheckpointError, type FloatDType, encodeElements, isFloatDType } from "@kiln/contract";
import { deviceTensorSource } from "../checkpoint/device-tensor-source.js";
import { decodeSafetensors, encodeStreamedSafetensors } from "../checkpoint/safetensors-codec.js";
import { type SafetensorsDType, toSafetensorsDType } from "../checkpoint/safetensors-dtype.js";
import type { StreamedTensorInput } from "../checkpoint/safetensors-layout.js";
import { elementCount } from "../graph/tensor.js";
import {
  EXP_AVG,
  EXP_AVG_SQ,
  META_DTYPE,
  META_LOSS_SCALE,
  META_LOSS_SCALE_GOOD_STEPS,
  META_MODEL,
  META_SKIPPED_STEPS,
  META_STEP,
  META_WORLD_SIZE,
  META_GLOBAL_BATCH_ROWS,
} from "../checkpoint/checkpoint-keys.js";
import type { Trainer, WholeOptimizerState } from "./trainer.js";
import type { ParamSlot } from "../model/param-layout.js";
import type { ModelConfig } from "../model/config.js";
import { checkCheckpointShape } from "./checkpoint-shape.js";

// What a kiln checkpoint holds, apart from where its bytes go: files (checkpoint-state.ts)
// or memory (a browser page). Nothing here touches a file system.

/** Tensors to read by name: an open safetensors file (SafetensorsReader) or one held in memory (tensorSourceOfBytes). */
export interface TensorSource {
  readonly metadata: Record<string, string>;
  /** Every tensor's name. */
  readonly names: readonly string[];
  has(name: string): boolean;
  info(name: string): { dtype: SafetensorsDType; shape: number[] };
  read(name: string): Promise<{ data: Uint8Array }>;
}

/** A whole safetensors file held in memory, as a TensorSource (the header is checked here). */
export function tensorSourceOfBytes(bytes: Uint8Array, fileName?: string): TensorSource {
  const { tensors, metadata } = decodeSafetensors(bytes, fileName);
  const where = fileName ?? "<in-memory safetensors>";
  const get = (name: string) => {
    const t = tensors.get(name);
    if (t === undefined) throw new CheckpointError(`no tensor named ${JSON.stringify(name)}`, { where, hint: "check whether this checkpoint belongs to another model" });
    return t;
  };
  return {
    metadata,
    names: [...tensors.keys()],
    has: (name) => tensors.has(name),
    info: (name) => get(name),
    read: async (name) => ({ data: get(name).data }),
  };
}

/**
 * The tensors and metadata of a training checkpoint: f32 weights (Hugging Face names), AdamW m and v, step, model, dtype.
 * Each tensor's bytes are read from the device as a writer asks for them (deviceTensorSource): none is copied
 * whole; write them before the trainer takes another step. A trainer with a sharded optimizer passes
 * the state its ranks gathered (`whole`: Trainer.wholeOptimizerState on rank 0), read from there instead.
 */
export async function trainerCheckpointContents(
  trainer: Trainer,
  metadata: Record<string, string> = {},
  whole?: WholeOptimizerState,
): Promise<{ tensors: StreamedTensorInput[]; metadata: Record<string, string> }> {
  const { m, v } = trainer.stateBuffers;
  // The weights in f32 (frozen 16-bit ones widened exactly), then AdamW's state of the trained ones.
  const tensors: StreamedTensorInput[] = weightTensors(trainer, "f32", whole);
  for (const [prefix, buffer, gathered] of [
    [EXP_AVG, m, whole?.m],
    [EXP_AVG_SQ, v, whole?.v],
  ] as const) {
    if (trainer.optimizerShard && !gathered) throw new Error("a trainer with a sharded optimizer writes a checkpoint from its gathered state (Trainer.wholeOptimizerState)");
    for (const { spec, at } of trainer.stateSlots(buffer)) {
      const n = elementCount(spec.shape);
      const data = gathered ? gathered.subarray(at.byteOffset / 4, at.byteOffset / 4 + n) : deviceTensorSource(trainer.backend, at, n);
      tensors.push({ name: prefix + spec.name, dtype: "F32", shape: spec.shape, data });
    }
  }
  return {
    tensors,
    metadata: {
      ...metadata,
      [META_STEP]: String(trainer.stepCount),
      [META_MODEL]: JSON.stringify(trainer.config.model),
      [META_DTYPE]: trainer.dtype,
      [META_SKIPPED_STEPS]: String(trainer.skippedSteps),
      [META_WORLD_SIZE]: String(trainer.worldSize),
      [META_GLOBAL_BATCH_ROWS]: String(trainer.worldSize * trainer.config.batchSize),
      ...(trainer.lossScaler
        ? { [META_LOSS_SCALE]: String(trainer.lossScaler.scale), [META_LOSS_SCALE_GOOD_STEPS]: String(trainer.lossScaler.goodSteps) }
        : {}),
      format: "pt",
    },
  };
}

/** The trained weights alone in `dtype` (the 16-bit ones rounded from the f32 masters on their way out, as encodeElements rounds), with step, model and dtype. */
export async function trainedWeightsContents(
  trainer: Trainer,
  metadata: Record<string, string> = {},
  dtype: FloatDType = trainer.dtype,
  whole?: WholeOptimizerState,
): Promise<{ tensors: StreamedTensorInput[]; metadata: Record<string, string> }> {
  const tensors = weightTensors(trainer, dtype, whole);
  return { tensors, metadata: { ...metadata, [META_STEP]: String(trainer.stepCount), [META_MODEL]: JSON.stringify(trainer.config.model), [META_DTYPE]: dtype, format: "pt" } };
}

/**
 * Every weight as a tensor of `dtype`, read from the trainer's weight slots; with a sharded optimizer
 * under a 16-bit dtype, the trained ones in f32 come from the gathered masters (`whole.master`), the
 * 16-bit parameters holding only their rounding.
 */
function weightTensors(trainer: Trainer, dtype: FloatDType, whole: WholeOptimizerState | undefined): StreamedTensorInput[] {
  const masters = whole?.master;
  const shardedMasters = trainer.optimizerShard !== undefined && trainer.dtype !== "f32";
  if (shardedMasters && dtype !== trainer.dtype && !masters) throw new Error("a trainer with a sharded optimizer reads its f32 master weights from its gathered state (Trainer.wholeOptimizerState)");
  const masterOffset = new Map(trainer.stateSlots(trainer.stateBuffers.grads).map((s) => [s.spec.name, s.at.byteOffset / 4]));
  return trainer.weightSlots().map(({ spec, at, dtype: stored }) => {
    const n = elementCount(spec.shape);
    const first = masterOffset.get(spec.name);
    if (shardedMasters && masters && first !== undefined) {
      const values = masters.subarray(first, first + n);
      return { name: spec.name, dtype: toSafetensorsDType(dtype), shape: spec.shape, data: dtype === "f32" ? values : encoded(values, dtype) };
    }
    return { name: spec.name, dtype: toSafetensorsDType(dtype), shape: spec.shape, data: deviceTensorSource(trainer.backend, at, n, dtype, stored) };
  });
}

/** f32 values as the bytes of a 16-bit dtype, rounded to nearest even. */
function encoded(values: Float32Array, dtype: FloatDType): Uint8Array {
  const bytes = new Uint8Array(2 * values.length);
  encodeElements(values, dtype, bytes);
  return bytes;
}

/** The bytes of the .safetensors file saveTrainerCheckpoint writes: the same tensors, order and metadata. */
export async function encodeTrainerCheckpoint(trainer: Trainer, metadata: Record<string, string> = {}): Promise<Uint8Array> {
  const c = await trainerCheckpointContents(trainer, metadata);
  return encodeStreamedSafetensors(c.tensors, c.metadata);
}

/**
 * Restores weights (master weights under bf16/f16, rounded into the parameters),
 * optimizer state, step, skipped steps and the f16 loss scaler from a training
 * checkpoint's tensors. Refuses, naming `where` and the tensor, a checkpoint of
 * another model, or one trained by another number of data-parallel ranks.
 * Returns the checkpoint's metadata.
 */
export async function restoreTrainerState(trainer: Trainer, source: TensorSource, where: string): Promise<Record<string, string>> {
  const meta = source.metadata;
  const step = Number(meta[META_STEP]);
  if (!Number.isSafeInteger(step) || step < 0) {
    throw new CheckpointError(`metadata ${META_STEP} is ${JSON.stringify(meta[META_STEP])}, not a step count`, {
      where,
      hint: "this file was not written by kiln train; pass a kiln checkpoint to --resume",
    });
  }
  const counter = (key: string, fallback: number, max = Number.MAX_SAFE_INTEGER) => {
    if (meta[key] === undefined) return fallback;
    const n = Number(meta[key]);
    if (!Number.isSafeInteger(n) || n < 0 || n > max) {
      throw new CheckpointError(`metadata ${key} is ${JSON.stringify(meta[key])}, not a count from 0 to ${max}`, { where, hint: "the checkpoint is damaged; resume from an earlier one" });
    }
    return n;
  };
  if (meta[META_DTYPE] !== undefined && !isFloatDType(meta[META_DTYPE] as never)) {
    throw new CheckpointError(`metadata ${META_DTYPE} is ${JSON.stringify(meta[META_DTYPE])}, not f32, bf16 or f16`, { where, hint: "the checkpoint is damaged; resume from an earlier one" });
  }
  const skippedSteps = counter(META_SKIPPED_STEPS, 0, step);
  const worldSize = counter(META_WORLD_SIZE, 1);
  // Another number of ranks continues the run when each global batch keeps its rows (ranks x batch size):
  // the windows are chosen over all ranks, so the same global batches come in the same order.
  const globalRows = meta[META_GLOBAL_BATCH_ROWS] === undefined ? undefined : counter(META_GLOBAL_BATCH_ROWS, 0);
  const rowsHere = trainer.worldSize * trainer.config.batchSize;
  if (worldSize !== trainer.worldSize && globalRows !== rowsHere) {
    const perRank = globalRows !== undefined && globalRows % trainer.worldSize === 0 ? globalRows / trainer.worldSize : undefined;
    throw new CheckpointError(`the checkpoint was trained by ${worldSize} data-parallel rank${worldSize === 1 ? "" : "s"}, this run has ${trainer.worldSize}`, {
      where,
      hint:
        `resume with ${worldSize} rank${worldSize === 1 ? "" : "s"} (--ranks ${worldSize})` +
        (perRank !== undefined ? `, or with ${trainer.worldSize} at --batch-size ${perRank} (${globalRows} rows a global batch, as it was)` : "") +
        `, so each step sees the same global batch; or start a new run from its weights with --init-from`,
    });
  }
  const scale = meta[META_LOSS_SCALE] === undefined ? undefined : Number(meta[META_LOSS_SCALE]);
  if (scale !== undefined && !(scale > 0 && Number.isFinite(scale))) {
    throw new CheckpointError(`metadata ${META_LOSS_SCALE} is ${JSON.stringify(meta[META_LOSS_SCALE])}, not a positive number`, { where, hint: "the checkpoint is damaged; resume from an earlier one" });
  }
  const goodSteps = counter(META_LOSS_SCALE_GOOD_STEPS, 0);
  const { m, v } = trainer.stateBuffers;
  const named = (prefix: string) => (s: ParamSlot) => ({ ...s, name: prefix + s.spec.name });
  const weights = trainer.weightSlots().map(named(""));
  const state = [...trainer.stateSlots(m).map((s) => ({ ...named(EXP_AVG)(s), which: "m" as const })), ...trainer.stateSlots(v).map((s) => ({ ...named(EXP_AVG_SQ)(s), which: "v" as const }))];
  const slots = [...weights, ...state];
  // Every name and shape, both ways, before any byte is loaded: a checkpoint of more layers is refused as one of fewer is.
  checkCheckpointShape(slots.map((s) => ({ name: s.name, shape: s.spec.shape })), source, where, trainer.config.model, recordedModel(meta));
  const valuesOf = async (name: string, n: number) => {
    const { data } = await source.read(name);
    if (data.byteLength !== n * 4) throw new CheckpointError(`tensor ${name} has the wrong size`, { where });
    return data.byteOffset % 4 === 0 ? new Float32Array(data.buffer, data.byteOffset, n) : new Float32Array(data.slice().buffer);
  };
  // A frozen parameter kept in the 16-bit training dtype takes the file's f32 values rounded (exact when a run of that dtype wrote them).
  for (const slot of weights) trainer.writeWeights(slot, 0, await valuesOf(slot.name, elementCount(slot.spec.shape)));
  // With a sharded optimizer each rank keeps the part of m and v it owns.
  for (const { spec, name, which } of state) trainer.writeOptimizerState(which, spec, await valuesOf(name, elementCount(spec.shape)));
  trainer.roundMastersToParams();
  trainer.stepCount = step;
  trainer.skippedSteps = skippedSteps;
  if (trainer.lossScaler && scale !== undefined) trainer.lossScaler.state = { scale, goodSteps };
  await trainer.backend.synchronize();
  return meta;
}

/** The model a checkpoint records (kiln.model), when it records one that parses. */
function recordedModel(meta: Record<string, string>): ModelConfig | undefined {
  try {
    return meta[META_MODEL] ? (JSON.parse(meta[META_MODEL]) as ModelConfig) : undefined;
  } catch {
    return undefined;
  }
}
