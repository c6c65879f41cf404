import type { DeviceDescription, FloatDType } from "@kiln/contract";
import { RECOMPUTE_POLICIES, type RecomputePolicy } from "../autodiff/rematerialize.js";
import type { ModelConfig } from "../model/config.js";
import { chooseRunPlan } from "../run/plan-run.js";
export { KEEP_ALL_SHARE } from "../run/plan-run.js";

/** What a run may ask for: a recompute policy, or "auto" (resolveRecompute picks one). */
export const RECOMPUTE_SETTINGS = ["auto", ...RECOMPUTE_POLICIES] as const;
export type RecomputeSetting = (typeof RECOMPUTE_SETTINGS)[number];

/** The recompute policy a run uses: `setting`, or for "auto" the one chooseRunPlan picks (run/plan-run.ts). */
export function resolveRecompute(
  setting: RecomputeSetting,
  model: ModelConfig,
  batchSize: number,
  seqLen: number,
  dtype: FloatDType,
  device: Pick<DeviceDescription, "kind" | "memoryBytes">,
  lossChunkBytes?: number,
): RecomputePolicy {
  return setting === "auto" ? chooseRunPlan({ model, batchSize, seqLen, recompute: setting }, dtype, device, lossChunkBytes).recompute : setting;
}
