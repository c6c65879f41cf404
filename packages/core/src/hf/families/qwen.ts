import type { HfFamily } from "./hf-family.js";
import { qwenWindowKeys, readLlamaLike, readQwenWindow, writeLlamaLike } from "./llama-like.js";

/** Qwen2ForCausalLM (Qwen2, Qwen2.5): biases on q, k and v; a sliding window where use_sliding_window says. */
export const qwen2Hf: HfFamily = {
  architecture: "Qwen2ForCausalLM",
  modelType: "qwen2",
  read(r) {
    const c = readLlamaLike(r, "qwen2");
    return { ...c, ...readQwenWindow(r, c.numLayers) };
  },
  write: (m, common) => ({ architectures: ["Qwen2ForCausalLM"], model_type: "qwen2", ...writeLlamaLike(m, common), ...qwenWindowKeys(m) }),
};

/** Qwen3ForCausalLM: q_norm and k_norm over each head, attention_bias when set, Qwen2's window keys. */
export const qwen3Hf: HfFamily = {
  architecture: "Qwen3ForCausalLM",
  modelType: "qwen3",
  read(r) {
    const c = readLlamaLike(r, "qwen3");
    const attentionBias = r.bool("attention_bias", false);
    return { ...c, ...(attentionBias ? { attentionBias } : {}), ...readQwenWindow(r, c.numLayers) };
  },
  write: (m, common) => ({ architectures: ["Qwen3ForCausalLM"], model_type: "qwen3", attention_bias: m.attentionBias ?? false, ...writeLlamaLike(m, common), ...qwenWindowKeys(m) }),
};
