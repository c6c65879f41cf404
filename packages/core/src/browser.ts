// @kiln/core/browser: the part of core that runs in a web page or worker (nothing
// here imports a Node module). Training, generation, and checkpoints as bytes;
// reading and writing files stays in the main entry.
export type { ModelConfig, ModelConfigInput } from "./model/config.js";
export { resolveModelConfig } from "./model/architectures.js";
export * from "./settings/index.js";
export * from "./run/index.js";
export { paramLayout, type ParamLayout, type ParamSpec } from "./model/param-layout.js";
export { learningRateAt, type LrScheduleConfig } from "./optim/lr-schedule.js";
export type { AdamWConfig } from "./optim/adamw.js";
export type { RecomputePolicy } from "./autodiff/rematerialize.js";
export { type RecomputeSetting, resolveRecompute } from "./train/recompute-choice.js";
export { Trainer, DEFAULT_LOAD_BALANCE_ALPHA, type TrainerConfig, type Batch, type BatchSource, type StepResult } from "./train/trainer.js";
export { ForwardRunner } from "./train/forward-runner.js";
export type { MemoryPlan } from "./train/memory-plan.js";
export { planTrainingMemory, planForwardMemory, trainingFlopsPerToken } from "./train/plan-training.js";
export * from "./checkpoint/checkpoint-keys.js";
export {
  encodeTrainerCheckpoint,
  restoreTrainerState,
  tensorSourceOfBytes,
  trainerCheckpointContents,
  trainedWeightsContents,
  type TensorSource,
} from "./train/checkpoint-contents.js";
export { encodeSafetensors, decodeSafetensors, type SafetensorsTensor, type DecodedSafetensors } from "./checkpoint/safetensors-codec.js";
export { TokenGenerator } from "./generate/token-generator.js";
export { sampleToken, type SamplingOptions } from "./generate/sample-token.js";
export { getTokenizer, isTokenizerName, TOKENIZER_NAMES, type Tokenizer, type TokenizerName } from "./data/tokenizer.js";
export type { TokenDataset } from "./data/token-dataset.js";
export { splitTokens, windowsIn, DEFAULT_VAL_FRACTION, type DataSplit, type TokenSplit } from "./data/token-split.js";
export { BatchSampler, type BatchSamplerOptions, type BatchPlan, type SamplerCursor } from "./data/batch-sampler.js";
export { Prefetcher } from "./data/prefetcher.js";
export { builtinCorpusSource, DEFAULT_BUILTIN_CORPUS_CHARS } from "./data/builtin-corpus-source.js";
export { generateStories, generateStory, STORY_GRAMMAR_VERSION } from "./data/stories/story-generator.js";
