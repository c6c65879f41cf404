import { ConfigError } from "@kiln/contract";
import { archOf } from "../model/architectures.js";
import type { LoraConfig, ModelConfig } from "../model/config.js";
import { paramLayout } from "../model/param-layout.js";
import { matrixModules } from "../model/low-rank-adapters.js";
import { withoutAdapters } from "../model/merge-adapters.js";

/** The trainer settings that shape LoRA. */
export interface LoraSettings {
  loraRank: number;
  loraAlpha?: number;
  loraTargets?: string[];
  loraDropout: number;
}

/**
 * The run's model with its LoRA adapters: trainer.lora_rank > 0 adds them (alpha 2 x rank
 * and the architecture's attention and MLP projections the model has, unless set). A model that already
 * has adapters (--init-from a LoRA checkpoint) keeps them, and settings that would change
 * them are refused. `whereOf` names a key's source for messages.
 */
export function withLoraSettings(model: ModelConfig, t: LoraSettings, whereOf: (key: string) => string): ModelConfig {
  if (t.loraRank === 0) {
    for (const [key, v] of [["trainer.lora_alpha", t.loraAlpha], ["trainer.lora_targets", t.loraTargets], ["trainer.lora_dropout", t.loraDropout || undefined]] as const) {
      if (v !== undefined && !model.lora) throw new ConfigError(`${key} is set but trainer.lora_rank is 0, so no adapters are trained`, { where: whereOf(key), hint: "set --lora-rank (8 or 16 are usual), or remove it" });
    }
    return model;
  }
  const lora: LoraConfig = {
    rank: t.loraRank,
    alpha: t.loraAlpha ?? 2 * t.loraRank,
    targets: t.loraTargets ?? defaultTargets(model),
    ...(t.loraDropout > 0 ? { dropout: t.loraDropout } : {}),
  };
  if (model.lora && JSON.stringify(model.lora) !== JSON.stringify(lora)) {
    const shape = (l: LoraConfig) => `rank ${l.rank}, alpha ${l.alpha}, targets ${l.targets.join(",")}${l.dropout ? `, dropout ${l.dropout}` : ""}`;
    const had = shape(model.lora);
    throw new ConfigError(`the weights this run starts from carry LoRA adapters (${had}); the run asks for ${shape(lora)}`, {
      where: whereOf("trainer.lora_rank"),
      hint: "leave out the LoRA settings to go on training those adapters, or start from the merged model (kiln export) to train new ones",
    });
  }
  return { ...model, lora };
}

/** The architecture's default targets that this model has (multi-head latent attention has no q_proj, k_proj or v_proj; Mamba layers none of them). */
function defaultTargets(model: ModelConfig): string[] {
  const modules = new Set(matrixModules(paramLayout(withoutAdapters(model)).specs));
  return archOf(model).loraTargets.filter((t) => modules.has(t));
}
