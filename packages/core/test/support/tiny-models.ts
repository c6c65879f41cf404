import { resolveModelConfig } from "../../src/model/architectures.js";

/** Three-layer GPT-2 and Llama (grouped-query attention) configs small enough to plan in milliseconds. */
export const tinyModels = {
  gpt2: resolveModelConfig({ arch: "gpt2", vocabSize: 24, hiddenSize: 16, numLayers: 3, numHeads: 4, maxSeqLen: 8 }),
  llama: resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 24, numLayers: 3, numHeads: 4, kvHeads: 2, intermediateSize: 32, maxSeqLen: 8 }),
};
