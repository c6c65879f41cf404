import type { Arch } from "./architectures.js";

/** Architecture hyperparameters (Hugging Face / Oxidizr field meanings, camelCase). */
export interface ModelConfig {
  arch: Arch;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  /** Key/value heads (GQA); equals numHeads for multi-head attention. */
  kvHeads: number;
  maxSeqLen: number;
  /** MLP inner width: GPT-2 4*hidden; Llama's SwiGLU intermediate_size. */
  intermediateSize: number;
  /** RoPE base (Llama). */
  ropeTheta: number;
  /** LayerNorm / RMSNorm epsilon. */
  normEps: number;
  /** lm_head shares the token embedding. */
  tieEmbeddings: boolean;
}

export type ModelConfigInput = Pick<ModelConfig, "arch" | "vocabSize" | "hiddenSize" | "numLayers" | "numHeads" | "maxSeqLen"> & Partial<ModelConfig>;

export const headDim = (c: ModelConfig) => c.hiddenSize / c.numHeads;
