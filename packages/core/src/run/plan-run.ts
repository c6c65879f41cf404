import { type DeviceDescription, type FloatDType, MemoryError } from "@kiln/contract";
import type { RecomputePolicy } from "../autodiff/rematerialize.js";
import type { ModelConfig } from "../model/config.js";
import type { RecomputeSetting } from "../train/recompute-choice.js";
import { planForwardMemory, planTraining } from "../train/plan-training.js";
import type { MemoryPlan } from "../train/memory-plan.js";
import { formatBytes } from "./format-bytes.js";

/** The share of a GPU's memory that the plan keeping every activation may fill for "auto" to keep them all. */
export const KEEP_ALL_SHARE = 0.85;

/** What a run's plan is made from. */
export interface RunShape {
  model: ModelConfig;
  batchSize: number;
  seqLen: number;
  recompute: RecomputeSetting;
  /** Ranks the optimizer state is sharded over (`--shard-optimizer`; absent or 1: not sharded). */
  shardRanks?: number;
  /** Rows packed with several examples (trainer.pack on example data). */
  packed?: boolean;
  /** Where the settings came from, for the refusal (a config file's path). */
  configPath: string;
}

/** A run planned once: the recompute policy "auto" resolved to, the training graph and step plan, and the memory they need. */
export interface RunPlan {
  recompute: RecomputePolicy;
  /** The training graph, its step plan and layouts, as the Trainer builds from them. */
  training: ReturnType<typeof planTraining>;
  /** The training plan's bytes plus evaluation's, which runs between steps in the training arena where it fits. */
  memory: MemoryPlan & { evaluation: number };
  /** Bytes the run needs (training and evaluation) and bytes the device has. */
  need: number;
  available: number;
}

function planWith(s: Omit<RunShape, "configPath">, dtype: FloatDType, recompute: RecomputePolicy, device: Pick<DeviceDescription, "kind" | "memoryBytes">, lossChunkBytes?: number): RunPlan {
  const training = planTraining(s.model, s.batchSize, s.seqLen, dtype, recompute, device.kind, lossChunkBytes, s.shardRanks, s.packed);
  const evaluation = planForwardMemory(s.model, s.batchSize, s.seqLen, dtype, training.memory.activations, s.packed);
  return { recompute, training, memory: { ...training.memory, evaluation }, need: training.memory.total + evaluation, available: device.memoryBytes };
}

/**
 * The plan of a run on a device, fitting or not. "auto" keeps every activation ("none": no
 * forward kernel runs twice) on a GPU when that plan, evaluation's extra included, fills at
 * most KEEP_ALL_SHARE of its memory; otherwise, and on a CPU, it recomputes the element-wise
 * outputs ("cheap": GELU, norms, SwiGLU), which a CPU's memory pays for more than its time does.
 * The keep-all plan is the run's plan when it is chosen.
 */
export function chooseRunPlan(s: Omit<RunShape, "configPath">, dtype: FloatDType, device: Pick<DeviceDescription, "kind" | "memoryBytes">, lossChunkBytes?: number): RunPlan {
  if (s.recompute !== "auto") return planWith(s, dtype, s.recompute, device, lossChunkBytes);
  if (device.kind !== "gpu") return planWith(s, dtype, "cheap", device, lossChunkBytes);
  const keepAll = planWith(s, dtype, "none", device, lossChunkBytes);
  return keepAll.need <= KEEP_ALL_SHARE * device.memoryBytes ? keepAll : planWith(s, dtype, "cheap", device, lossChunkBytes);
}

/** Plans a run once (chooseRunPlan), before anything is allocated, and refuses one that does not fit, saying what to change. */
export function planRun(s: RunShape, dtype: FloatDType, device: Pick<DeviceDescription, "kind" | "memoryBytes" | "name">, lossChunkBytes?: number): RunPlan {
  const plan = chooseRunPlan(s, dtype, device, lossChunkBytes);
  if (plan.need > plan.available) {
    throw new MemoryError(`training needs ${formatBytes(plan.need)} but ${device.name} has ${formatBytes(plan.available)}`, {
      where: s.configPath,
      hint:
        `lower trainer.batch_size (now ${s.batchSize}; --batch-size) or trainer.seq_len (now ${s.seqLen}; --seq-len) and raise trainer.gradient_accumulation (--grad-accum) ` +
        `to keep tokens per step${s.recompute === "blocks" ? "" : ", or recompute more (trainer.recompute: blocks)"}; kiln estimate -f ${s.configPath} shows the plan`,
    });
  }
  return plan;
}
