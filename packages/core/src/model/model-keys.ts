import type { ModelConfig } from "./config.js";

/** The ModelConfig field each key of a YAML config's model section sets (Oxidizr's names where they exist). */
export const MODEL_YAML_KEYS = {
  arch: "arch",
  vocab_size: "vocabSize",
  hidden_size: "hiddenSize",
  num_layers: "numLayers",
  num_heads: "numHeads",
  kv_heads: "kvHeads",
  max_seq_len: "maxSeqLen",
  intermediate_size: "intermediateSize",
  rope_theta: "ropeTheta",
  norm_eps: "normEps",
  tie_embeddings: "tieEmbeddings",
  num_experts: "numExperts",
  experts_per_tok: "expertsPerToken",
  shared_expert_enabled: "sharedExpert",
  kv_latent_dim: "kvLatentDim",
  q_latent_dim: "qLatentDim",
  d_rope: "ropeDim",
} as const satisfies Record<string, keyof ModelConfig>;
