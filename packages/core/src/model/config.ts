/** Architecture hyperparameters (Hugging Face / Oxidizr field meanings, camelCase). */
export interface ModelConfig {
  arch: "gpt2" | "llama";
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

/** Fills architecture defaults: GPT-2 (MHA, 4x MLP, eps 1e-5, tied) or Llama (eps 1e-6, theta 10000, untied). */
export function resolveModelConfig(c: ModelConfigInput): ModelConfig {
  const gpt2 = c.arch === "gpt2";
  return {
    ...c,
    kvHeads: c.kvHeads ?? c.numHeads,
    intermediateSize: c.intermediateSize ?? (gpt2 ? 4 * c.hiddenSize : Math.round((8 * c.hiddenSize) / 3 / 64) * 64),
    ropeTheta: c.ropeTheta ?? 10000,
    normEps: c.normEps ?? (gpt2 ? 1e-5 : 1e-6),
    tieEmbeddings: c.tieEmbeddings ?? gpt2,
  };
}

export const headDim = (c: ModelConfig) => c.hiddenSize / c.numHeads;
