import type { HfFamily } from "./hf-family.js";
import { readLlamaLike, writeLlamaLike } from "./llama-like.js";

/** LlamaForCausalLM: attention_bias and mlp_bias when set, RoPE scaling llama3 or linear. */
export const llamaHf: HfFamily = {
  architecture: "LlamaForCausalLM",
  modelType: "llama",
  read(r) {
    const attentionBias = r.bool("attention_bias", false);
    const mlpBias = r.bool("mlp_bias", false);
    return { ...readLlamaLike(r, "llama"), ...(attentionBias ? { attentionBias } : {}), ...(mlpBias ? { mlpBias } : {}) };
  },
  write: (m, common) => ({
    architectures: ["LlamaForCausalLM"],
    model_type: "llama",
    attention_bias: m.attentionBias ?? false,
    mlp_bias: m.mlpBias ?? false,
    pretraining_tp: 1,
    ...writeLlamaLike(m, common),
  }),
};
