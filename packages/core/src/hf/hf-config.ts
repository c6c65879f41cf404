import { CheckpointError } from "@kiln/contract";
import { type Arch, ARCH_NAMES, modelConfigProblem, resolveModelConfig } from "../model/architectures.js";
import type { ModelConfig } from "../model/config.js";
import { gemma3Hf } from "./families/gemma3.js";
import { gpt2Hf } from "./families/gpt2.js";
import type { HfFamily } from "./families/hf-family.js";
import { llamaHf } from "./families/llama.js";
import { mistralHf } from "./families/mistral.js";
import { qwen2Hf, qwen3Hf } from "./families/qwen.js";
import { HfConfigReader, type Json } from "./hf-config-reader.js";

/** The transformers class of each architecture kiln trains, with its config.json mapping. */
export const HF_FAMILIES: Record<Arch, HfFamily> = { gpt2: gpt2Hf, llama: llamaHf, qwen2: qwen2Hf, qwen3: qwen3Hf, mistral: mistralHf, gemma3: gemma3Hf };

/** What transformers calls each architecture kiln trains. */
export const HF_ARCHITECTURES = Object.fromEntries(ARCH_NAMES.map((a) => [a, HF_FAMILIES[a].architecture])) as Record<Arch, string>;

/**
 * The kiln model a Hugging Face config.json describes, by its model_type (HF_FAMILIES).
 * Anything kiln's forward pass does not compute (RoPE scaling other than llama3 and linear,
 * another activation, ...) is refused by key; so is a shape kiln cannot build.
 */
export function modelConfigFromHf(json: unknown, file: string): ModelConfig {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new CheckpointError("config.json is not a JSON object", { where: file, hint: "a Hugging Face model folder's config.json holds one object of settings" });
  }
  const r = new HfConfigReader(json as Json, file);
  const type = r.json.model_type;
  const family = ARCH_NAMES.map((a) => HF_FAMILIES[a]).find((f) => f.modelType === type);
  if (!family) {
    const known = ARCH_NAMES.map((a) => `"${HF_FAMILIES[a].modelType}" (${HF_FAMILIES[a].architecture})`).join(", ");
    return r.fail("model_type", `model_type ${JSON.stringify(type)} is not one kiln trains`, `kiln loads model_type ${known}`);
  }
  const m = resolveModelConfig(family.read(r));
  const problem = modelConfigProblem(m);
  if (problem) throw new CheckpointError(problem.message, { where: file, hint: "kiln cannot represent this model" });
  return m;
}

/** Token ids a config names for generation, where the tokenizer has them. */
export interface SpecialTokens {
  bos?: number;
  eos?: number;
}

/**
 * config.json for `m` as transformers writes it for the architecture's class. The dtype
 * goes under both names transformers has used (dtype since 5, torch_dtype before).
 */
export function hfConfigOf(m: ModelConfig, torchDtype: string, tokens: SpecialTokens = {}): Json {
  const common = { bos_token_id: tokens.bos ?? null, dtype: torchDtype, eos_token_id: tokens.eos ?? null, pad_token_id: null, torch_dtype: torchDtype };
  return HF_FAMILIES[m.arch].write(m, common);
}

/** generation_config.json: the special tokens and greedy-by-default settings transformers reads. */
export function hfGenerationConfigOf(tokens: SpecialTokens = {}): Json {
  return { _from_model_config: true, bos_token_id: tokens.bos ?? null, eos_token_id: tokens.eos ?? null };
}
