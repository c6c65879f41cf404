import path from "node:path";
import { CheckpointError, type FloatDType, encodeToBytes } from "@kiln/contract";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import { toSafetensorsDType } from "../checkpoint/safetensors-dtype.js";
import { writeSafetensors } from "../checkpoint/safetensors-file.js";
import { META_BASE_MODEL } from "../checkpoint/checkpoint-keys.js";
import { writeDirectoryAtomically, writeFileAtomically } from "../fs/write-atomically.js";
import { archOf } from "../model/architectures.js";
import type { LoraConfig, ModelConfig } from "../model/config.js";
import { paramLayout } from "../model/param-layout.js";
import { readJsonFile } from "./hf-shards.js";
import { PretrainedWeights, type TensorSource, checkTensor } from "./pretrained-weights.js";

// PEFT's LoRA adapter folders: adapter_config.json and adapter_model.safetensors, whose tensors are
// the wrapped model's state-dict names under "base_model.model." (`…q_proj.lora_A.weight`).

export const PEFT_CONFIG_FILE = "adapter_config.json";
export const PEFT_WEIGHTS_FILE = "adapter_model.safetensors";
const PEFT_PREFIX = "base_model.model.";

/** The adapters' kiln names (`<module>.lora_A.weight`, `.lora_B.weight`) with their shapes, for `model` with `lora`. */
function adapterSpecs(model: ModelConfig, lora: LoraConfig) {
  return paramLayout({ ...model, lora }).specs.filter((s) => !s.frozen);
}

/** adapter_config.json for a LoRA model, as PEFT writes it for a causal language model. */
export function peftAdapterConfig(model: ModelConfig & { lora: LoraConfig }, baseModel: string | null): Record<string, unknown> {
  return {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: baseModel,
    r: model.lora.rank,
    lora_alpha: model.lora.alpha,
    target_modules: [...model.lora.targets].sort(),
    lora_dropout: model.lora.dropout ?? 0.0,
    bias: "none",
    // GPT-2's Conv1D stores weights (in, out): PEFT transposes when it merges.
    fan_in_fan_out: archOf(model).linearLayout === "in_out",
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    use_rslora: false,
    use_dora: false,
    revision: null,
  };
}

/**
 * Writes a LoRA checkpoint's adapters as a PEFT folder (PeftModel.from_pretrained loads it
 * over the base model): adapter_config.json and adapter_model.safetensors in `dtype`. The
 * folder appears whole or not at all. Returns the names of the files written.
 */
export async function exportPeftAdapter(checkpoint: string, out: string, dtype: FloatDType = "f32"): Promise<string[]> {
  const source = await PretrainedWeights.open(checkpoint);
  try {
    const model = source.model;
    if (!model.lora) {
      throw new CheckpointError("the checkpoint has no LoRA adapters: its run trained every weight", { where: checkpoint, hint: "export the whole model (leave out --adapter-only), or train adapters with --lora-rank" });
    }
    const config = peftAdapterConfig({ ...model, lora: model.lora }, source.metadata[META_BASE_MODEL] ?? null);
    const specs = adapterSpecs(model, model.lora);
    await writeDirectoryAtomically(
      out,
      async (dir) => {
        const weights = await source.read();
        await writeFileAtomically(path.join(dir, PEFT_CONFIG_FILE), `${JSON.stringify(config, null, 2)}\n`, { what: "adapter file", error: CheckpointError });
        await writeSafetensors(
          path.join(dir, PEFT_WEIGHTS_FILE),
          specs.map((s) => {
            const values = weights.get(s.name)!;
            return { name: PEFT_PREFIX + s.name, dtype: toSafetensorsDType(dtype), shape: s.shape, data: dtype === "f32" ? values : encodeToBytes(values, dtype) };
          }),
          { format: "pt" },
        );
      },
      { error: CheckpointError },
    );
    return [PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE];
  } finally {
    await source.close();
  }
}

/** The LoRA shape an adapter_config.json describes, refusing (naming the file and key) what kiln does not compute. */
function loraOfPeftConfig(raw: unknown, file: string, model: ModelConfig): LoraConfig {
  const c = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const refuse = (key: string, what: string, hint: string) => {
    throw new CheckpointError(`${key} ${JSON.stringify(c[key])}: ${what}`, { where: file, hint });
  };
  if (c.peft_type !== "LORA") refuse("peft_type", "kiln reads LoRA adapters only", "pass a folder written by PEFT for a LoraConfig (or by kiln export --adapter-only)");
  if (!Number.isSafeInteger(c.r) || (c.r as number) < 1) refuse("r", "the rank must be a whole number >= 1", "the adapter config is damaged");
  if (typeof c.lora_alpha !== "number" || !(c.lora_alpha > 0)) refuse("lora_alpha", "alpha must be a number > 0", "the adapter config is damaged");
  if (!Array.isArray(c.target_modules) || c.target_modules.length === 0 || !c.target_modules.every((t) => typeof t === "string")) {
    refuse("target_modules", "kiln takes a list of module names (not a pattern)", "save the adapter with target_modules as a list, such as [\"q_proj\", \"v_proj\"]");
  }
  if (c.use_rslora === true) refuse("use_rslora", "rank-stabilised scaling (alpha / sqrt(r)) is not kiln's", "train the adapter with use_rslora false");
  if (c.use_dora === true) refuse("use_dora", "DoRA's magnitude vectors are not LoRA", "train the adapter with use_dora false");
  if (c.bias !== undefined && c.bias !== "none") refuse("bias", "kiln's adapters train no biases", "train the adapter with bias \"none\"");
  const empty = (v: unknown) => v === undefined || v === null || (Array.isArray(v) && v.length === 0) || (typeof v === "object" && Object.keys(v as object).length === 0);
  for (const key of ["modules_to_save", "rank_pattern", "alpha_pattern", "layers_to_transform"]) {
    if (!empty(c[key])) refuse(key, "kiln gives every target the same rank and alpha in every layer, and trains nothing besides the adapters", `save the adapter without ${key}`);
  }
  const transposed = archOf(model).linearLayout === "in_out";
  if (c.fan_in_fan_out !== undefined && c.fan_in_fan_out !== transposed) {
    refuse("fan_in_fan_out", `a ${model.arch} model's weights are stored ${transposed ? "(in, out)" : "(out, in)"}`, "the adapter belongs to another kind of model");
  }
  const dropout = typeof c.lora_dropout === "number" && c.lora_dropout > 0 && c.lora_dropout < 1 ? c.lora_dropout : undefined;
  return { rank: c.r as number, alpha: c.lora_alpha as number, targets: c.target_modules as string[], ...(dropout === undefined ? {} : { dropout }) };
}

/**
 * Opens a PEFT LoRA adapter folder for the base model `base`: its config read and checked,
 * every adapter tensor the config implies present with the shape the base gives it, and no
 * other. Its pieces are the adapters under kiln's names; `lora` is its shape.
 */
export async function openPeftAdapter(dir: string, base: ModelConfig): Promise<{ lora: LoraConfig; weights: PretrainedWeights }> {
  const configFile = path.join(dir, PEFT_CONFIG_FILE);
  const lora = loraOfPeftConfig(await readJsonFile(configFile, "a PEFT adapter folder has an adapter_config.json beside adapter_model.safetensors"), configFile, base);
  const { lora: _, ...plain } = base;
  const specs = adapterSpecs(plain, lora);
  const file = path.join(dir, PEFT_WEIGHTS_FILE);
  const reader = await openSafetensors(file);
  try {
    const sources = new Map<string, TensorSource>();
    // PEFT saves without the adapter's name; a state dict taken from a live model has ".default" in it.
    const fileName = (kiln: string) => [PEFT_PREFIX + kiln, PEFT_PREFIX + kiln.replace(/\.(lora_[AB])\.weight$/, ".$1.default.weight")].find((n) => reader.has(n));
    for (const s of specs) {
      const name = fileName(s.name);
      if (name === undefined) {
        throw new CheckpointError(`tensor ${PEFT_PREFIX + s.name} is missing`, { where: file, hint: `${PEFT_CONFIG_FILE} targets ${lora.targets.join(", ")}, which this base model has here; the adapter belongs to another base model` });
      }
      checkTensor(reader, name, s.shape, `for this base (and the adapter's r ${lora.rank})`);
      sources.set(s.name, { reader, name });
    }
    const used = new Set([...sources.values()].map((t) => t.name));
    const extra = reader.names.find((n) => !used.has(n));
    if (extra !== undefined) throw new CheckpointError(`tensor ${extra} is not an adapter of this base model`, { where: file, hint: "the adapter belongs to another base model (other layers or modules)" });
    return { lora, weights: new PretrainedWeights(dir, "peft", { ...plain, lora }, configFile, {}, sources, [reader]) };
  } catch (err) {
    await reader.close();
    throw err;
  }
}
