import type { HfFamily } from "./hf-family.js";
import { readLlamaLike, writeLlamaLike } from "./llama-like.js";

/** MistralForCausalLM: Llama's layout with sliding_window (null: full attention) in every layer. */
export const mistralHf: HfFamily = {
  architecture: "MistralForCausalLM",
  modelType: "mistral",
  read(r) {
    const c = readLlamaLike(r, "mistral");
    return { ...c, ...(r.has("sliding_window") ? { slidingWindow: r.int("sliding_window") } : {}) };
  },
  write: (m, common) => ({ architectures: ["MistralForCausalLM"], model_type: "mistral", ...writeLlamaLike(m, common), sliding_window: m.slidingWindow ?? null }),
};
