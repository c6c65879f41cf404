export * from "./checkpoint/index.js";
export * from "./gguf/index.js";
export * from "./fs/index.js";
export { Graph, type GraphNode } from "./graph/graph.js";
export type { TensorInfo, TensorKind } from "./graph/tensor.js";
export { appendBackward } from "./autodiff/append-backward.js";
export { rematerialize, type RecomputePolicy } from "./autodiff/rematerialize.js";
export { RECOMPUTE_SETTINGS, type RecomputeSetting, resolveRecompute } from "./train/recompute-choice.js";
export { planStep, type StepPlan } from "./plan/plan-step.js";
export { packArena, type ArenaPacking } from "./plan/pack-arena.js";
export { tensorLifetimes, type Lifetime } from "./plan/liveness.js";
export { CompiledStep, type ParameterBinding } from "./exec/compiled-step.js";
export { StepProfiler, describeKernelArgs, kernelCost, type KernelCost, type ProfiledStep, type KernelEvent, type DataEvent, type KernelRegion } from "./exec/step-profiler.js";
export { summarizeProfile, type ProfileSummary, type ProfileRow } from "./exec/profile-summary.js";
export { trainingStepCosts, rooflineSeconds, stepRoofline, type TrainingStepCosts, type KernelCallCost } from "./train/step-costs.js";
export { attentionWindow, mamba3Of, mambaOf, moeOf, type LayerType, type ModelConfig, type ModelConfigInput } from "./model/config.js";
export { mlaOf } from "./model/mla.js";
export * from "./settings/index.js";
export * from "./run/index.js";
export { ARCHITECTURES, ARCH_NAMES, archOf, modelConfigProblem, resolveModelConfig, type Arch } from "./model/architectures.js";
export type { ArchDef, ConfigProblem } from "./model/arch-def.js";
export { paramLayout, type ParamLayout, type ParamSpec } from "./model/param-layout.js";
export { buildTrainingGraph, buildForwardGraph, buildEvalGraph, positionIds, type ModelGraph } from "./model/build-graph.js";
export { initialParamBytes, uploadInitialParams } from "./model/init-params.js";
export { learningRateAt, type LrScheduleConfig } from "./optim/lr-schedule.js";
export { AdamW, type AdamWConfig } from "./optim/adamw.js";
export { Trainer, type TrainerConfig, type Batch, type BatchSource, type StepResult } from "./train/trainer.js";
export { ForwardRunner } from "./train/forward-runner.js";
export type { MemoryPlan } from "./train/memory-plan.js";
export { philox4x32, fillNormal, streamOf } from "./rng/philox.js";
export { planTrainingMemory, planForwardMemory, trainingFlopsPerToken } from "./train/plan-training.js";
export { saveTrainerCheckpoint, loadTrainerCheckpoint, saveTrainedWeights } from "./train/checkpoint-state.js";
export type { GradientSync, ReduceOp } from "./train/gradient-sync.js";
export { planGradientBuckets, DEFAULT_BUCKET_BYTES, type GradientBucket } from "./train/gradient-buckets.js";
export { PretrainedWeights, type ParameterPiece, pretrainedModel } from "./hf/pretrained-weights.js";
export { exportHfFolder } from "./hf/export-hf-folder.js";
export { exportPeftAdapter, openPeftAdapter, peftAdapterConfig, PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE } from "./hf/peft-adapter.js";
export { mergeAdapters, withoutAdapters } from "./model/merge-adapters.js";
export { trainableLayout } from "./model/param-layout.js";
export type { LoraConfig } from "./model/config.js";
export { modelConfigFromHf, hfConfigOf, HF_ARCHITECTURES } from "./hf/hf-config.js";
export { DEFAULT_LOAD_BALANCE_ALPHA } from "./train/trainer.js";
export { DynamicLossScaler, DEFAULT_LOSS_SCALER, type LossScalerConfig, type LossScalerState } from "./train/loss-scaler.js";
export { chooseTrainingDType, assertBackendTrains, TRAINING_DTYPE_CHOICES, type TrainingDTypeChoice } from "./train/training-dtype.js";
export * from "./data/index.js";
export { InferenceSession } from "./generate/inference-session.js";
export { type EvalOptions, type EvalResult, bytesOfTokens, evaluateLoss, windowStarts } from "./eval/evaluate-loss.js";
export { TokenGenerator } from "./generate/token-generator.js";
export {
  encodeTrainerCheckpoint,
  restoreTrainerState,
  tensorSourceOfBytes,
  trainerCheckpointContents,
  trainedWeightsContents,
  type TensorSource,
} from "./train/checkpoint-contents.js";
export { sampleToken, type SamplingOptions } from "./generate/sample-token.js";
