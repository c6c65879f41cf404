import type { DeviceDescription, FloatDType } from "@kiln/contract";
import type { RecomputePolicy } from "../autodiff/rematerialize.js";
import type { ModelConfig } from "../model/config.js";
import { planForwardMemory, planTrainingMemory } from "./plan-training.js";

/** What a run may ask for: a recompute policy, or "auto" (resolveRecompute picks one). */
export type RecomputeSetting = RecomputePolicy | "auto";

/** The share of a GPU's memory that the plan keeping every activation may fill for "auto" to keep them all. */
export const KEEP_ALL_SHARE = 0.85;

/**
 * The recompute policy a run uses. "auto" keeps every activation ("none": no forward
 * kernel runs twice) on a GPU when that plan, evaluation's extra included, fills at most
 * KEEP_ALL_SHARE of the device's memory; otherwise, and on the CPU, it recomputes the
 * element-wise outputs ("cheap": GELU, norms, SwiGLU), which a CPU's memory pays for more
 * than its time does. Any other setting is returned as it is.
 */
export function resolveRecompute(
  setting: RecomputeSetting,
  model: ModelConfig,
  batchSize: number,
  seqLen: number,
  dtype: FloatDType,
  device: Pick<DeviceDescription, "kind" | "memoryBytes">,
  lossChunkBytes?: number,
): RecomputePolicy {
  if (setting !== "auto") return setting;
  if (device.kind !== "gpu") return "cheap";
  const keepAll = planTrainingMemory(model, batchSize, seqLen, dtype, "none", "gpu", lossChunkBytes);
  const evaluation = planForwardMemory(model, batchSize, seqLen, dtype, keepAll.activations);
  return keepAll.total + evaluation <= KEEP_ALL_SHARE * device.memoryBytes ? "none" : "cheap";
}
