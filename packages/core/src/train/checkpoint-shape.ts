import { CheckpointError } from "@kiln/contract";
import type { ModelConfig } from "../model/config.js";
import { yamlKeyOf } from "../settings/settings-table.js";
import type { SafetensorsDType } from "../checkpoint/safetensors-dtype.js";

/** A tensor the run expects: its name in the file and its shape (every training tensor is F32). */
export interface ExpectedTensor {
  name: string;
  shape: readonly number[];
}

/** What a checkpoint's tensor list offers: names with dtype and shape. */
export interface CheckpointTensors {
  names: readonly string[];
  info(name: string): { dtype: SafetensorsDType; shape: number[] };
}

const LISTED = 4;

/**
 * Compares a checkpoint's tensors with the model's, both ways (a tensor missing, one
 * the model does not have, another shape or dtype), before anything is loaded; refuses
 * with the differing names and the model settings that differ (from the checkpoint's
 * recorded model). `model` is the run's; `recorded` the checkpoint's, when it has one.
 */
export function checkCheckpointShape(expected: readonly ExpectedTensor[], file: CheckpointTensors, where: string, model: ModelConfig, recorded: ModelConfig | undefined): void {
  const wanted = new Map(expected.map((t) => [t.name, t.shape]));
  const present = new Set(file.names);
  const missing = expected.filter((t) => !present.has(t.name)).map((t) => t.name);
  const extra = file.names.filter((n) => !wanted.has(n));
  const reshaped = expected
    .filter((t) => present.has(t.name))
    .flatMap((t) => {
      const info = file.info(t.name);
      return info.dtype === "F32" && info.shape.join(",") === t.shape.join(",") ? [] : [`${t.name} is ${info.dtype} [${info.shape}], the model needs F32 [${t.shape}]`];
    });
  if (missing.length + extra.length + reshaped.length === 0) return;
  const parts = [
    missing.length > 0 ? `${missing.length} tensor${missing.length === 1 ? "" : "s"} the model needs ${missing.length === 1 ? "is" : "are"} missing (${listed(missing)})` : "",
    extra.length > 0 ? `${extra.length} tensor${extra.length === 1 ? "" : "s"} of the checkpoint the model does not have (${listed(extra)})` : "",
    reshaped.length > 0 ? `${reshaped.length} of another shape or dtype (${listed(reshaped)})` : "",
  ].filter((p) => p !== "");
  const differences = recorded ? modelDifferences(recorded, model) : [];
  throw new CheckpointError(`the checkpoint does not match the model: ${parts.join("; ")}`, {
    where,
    hint:
      (differences.length > 0 ? `the checkpoint's model has ${differences.join(", ")}. ` : "") +
      "Resume with the model config the checkpoint was trained with, or train this model in another --output-dir.",
  });
}

/** The first few names, weights before their AdamW state ("optimizer.exp_avg.…"). */
function listed(all: readonly string[]): string {
  const names = [...all.filter((n) => !n.startsWith("optimizer.")), ...all.filter((n) => n.startsWith("optimizer."))];
  return names.length <= LISTED ? names.join(", ") : `${names.slice(0, LISTED).join(", ")} and ${names.length - LISTED} more`;
}

/** "model.num_layers 4 (this run: 2)" for each model setting the two configs set differently. */
function modelDifferences(theirs: ModelConfig, ours: ModelConfig): string[] {
  const fields = new Set([...Object.keys(theirs), ...Object.keys(ours)] as (keyof ModelConfig)[]);
  return [...fields]
    .filter((f) => JSON.stringify(theirs[f]) !== JSON.stringify(ours[f]))
    .map((f) => (f === "lora" ? `${loraText(theirs.lora)} (this run: ${loraText(ours.lora)})` : `model.${yamlKeyOf(f)} ${JSON.stringify(theirs[f]) ?? "unset"} (this run: ${JSON.stringify(ours[f]) ?? "unset"})`));
}

/** A model's LoRA adapters as the flags that make them: "LoRA --lora-rank 8 --lora-alpha 16 --lora-targets q_proj,v_proj", or "no LoRA". */
function loraText(lora: ModelConfig["lora"]): string {
  return lora ? `LoRA --lora-rank ${lora.rank} --lora-alpha ${lora.alpha} --lora-targets ${lora.targets.join(",")}` : "no LoRA";
}
