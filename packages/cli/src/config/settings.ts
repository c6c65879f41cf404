import type { TargetDevice } from "../train/open-backend.js";
import path from "node:path";
import { ConfigError } from "@kiln/contract";
import { type ModelConfig, type RecomputeSetting, type TrainingDTypeChoice, modelConfigProblem, resolveModelConfig } from "@kiln/core";
import { trainingDTypeOf } from "./dtype-choice.js";
import type { LoadedConfig } from "./load-config.js";
import type { ModelSection } from "./schema.js";
import { type InitModel, checkModelAgrees, yamlKeyOf } from "./model-section.js";
import { applySettingFlags } from "./setting-flags.js";

/**
 * Flags that override the config file, as commander parsed them (undefined = keep the
 * file's value): the setting flags of SETTING_FLAGS by their property names, plus these.
 */
export interface ConfigOverrides {
  [flag: string]: unknown;
  dtype?: TrainingDTypeChoice;
  tf32?: boolean;
}

/** Everything a training run needs, resolved from the file, the flags and the defaults. */
export interface RunSettings {
  configPath: string;
  configText: string;
  model: ModelConfig;
  batchSize: number;
  seqLen: number;
  gradAccum: number;
  maxSteps: number | undefined;
  numEpochs: number | undefined;
  lr: number;
  minLr: number;
  warmupSteps: number;
  schedule: "cosine" | "linear" | "constant";
  weightDecay: number;
  beta1: number;
  beta2: number;
  eps: number;
  gradClip: number;
  logInterval: number;
  saveInterval: number;
  evalInterval: number;
  evalIters: number;
  /** Keep the checkpoint with the lowest val_loss as best.safetensors. */
  saveBest: boolean;
  /** Evaluations without a lower val_loss that stop the run. */
  earlyStop: number | undefined;
  targetDevice: TargetDevice;
  /** The dtype asked for; "auto" is resolved once the backend is open (chooseTrainingDType). */
  dtype: TrainingDTypeChoice;
  /** Allow TF32 matmuls where a backend can use them (CUDA). */
  tf32: boolean;
  /** Run each micro-batch as one recorded kernel graph where the backend records them (CUDA). */
  cudaGraphs: boolean;
  seed: number;
  prefetch: number;
  /** Activations recomputed in the backward pass: auto, none, cheap (GELU/norms), blocks (checkpointing). */
  recompute: RecomputeSetting;
  /** Where checkpoints and metrics.jsonl go. */
  outputDir: string;
  /** Step checkpoints kept (the newest). */
  maxCheckpoints: number;
  /** A step with a NaN or infinite loss or gradients: stop with an error, or skip it (weights unchanged). */
  onNonFinite: "stop" | "skip";
  /** Data parallel: milliseconds a collective waits for the other ranks. */
  syncTimeoutMs: number;
  /** Data parallel: bytes of gradients per all-reduce bucket. */
  bucketBytes: number;
  /** Mixture of experts: the load-balancing loss coefficient. */
  loadBalanceAlpha: number;
  /** Oxidizr settings the config carries that kiln ignores (named in a warning). */
  ignoredKeys: readonly string[];
  dataPath: string | undefined;
  tokenizer: string | undefined;
  valFraction: number;
}

/**
 * Applies flags over the file and checks what no single key can: divisibility, lengths, ranges.
 * With `init` (--init-from) the model is the one the weights come with, and the file's model
 * section, when there is one, must agree with it.
 */
export function resolveSettings(loaded: LoadedConfig, o: ConfigOverrides = {}, init?: InitModel): RunSettings {
  const { config, fromFlags } = applySettingFlags(loaded.config, o);
  const { trainer: t, data } = config;
  const file = loaded.path;
  const fail = (key: string, message: string, hint: string): never => {
    throw new ConfigError(message, { where: `${file} (${key})`, hint });
  };
  if (init && config.model) checkModelAgrees(config.model, init, file);
  const model = init?.model ?? modelOfSection(config.model, file, fail);
  const seqLen = t.seq_len ?? model.maxSeqLen;
  if (seqLen > model.maxSeqLen) {
    fail(fromFlags.get("trainer.seq_len") ?? "trainer.seq_len", `seq_len ${seqLen} is longer than model.max_seq_len ${model.maxSeqLen}`, `use --seq-len ${model.maxSeqLen} or less, or raise model.max_seq_len`);
  }
  const maxSteps = t.max_steps;
  if (maxSteps === undefined && t.num_epochs === undefined) {
    fail("trainer.max_steps", "neither trainer.max_steps nor trainer.num_epochs is set, so training would never end", "set trainer.max_steps (or pass --max-steps), or trainer.num_epochs");
  }
  const name = path.basename(file).replace(/\.ya?ml$/i, "");
  return {
    configPath: file,
    configText: loaded.text,
    model,
    batchSize: t.batch_size,
    seqLen,
    gradAccum: t.gradient_accumulation,
    maxSteps,
    numEpochs: t.num_epochs,
    lr: t.learning_rate,
    minLr: t.min_learning_rate ?? t.learning_rate / 10,
    warmupSteps: t.warmup_steps,
    schedule: t.lr_schedule,
    weightDecay: t.weight_decay,
    beta1: t.beta1,
    beta2: t.beta2,
    eps: t.eps,
    gradClip: t.grad_clip,
    logInterval: t.log_interval,
    saveInterval: t.save_interval,
    evalInterval: t.eval_interval,
    evalIters: t.eval_iters,
    saveBest: t.save_best,
    earlyStop: t.early_stop,
    targetDevice: t.target_device,
    dtype: o.dtype ?? trainingDTypeOf(t.dtype)!,
    tf32: o.tf32 ?? t.tf32,
    cudaGraphs: t.cuda_graphs,
    seed: t.seed,
    prefetch: t.prefetch,
    recompute: t.recompute,
    outputDir: t.checkpoint_dir ?? path.join("checkpoints", name),
    maxCheckpoints: t.max_checkpoints,
    onNonFinite: t.on_nonfinite,
    syncTimeoutMs: t.sync_timeout * 1000,
    bucketBytes: Math.max(4, Math.round(t.bucket_mb * 1024 * 1024)),
    loadBalanceAlpha: t.load_balance_alpha,
    ignoredKeys: loaded.ignoredKeys,
    dataPath: data.path,
    tokenizer: data.tokenizer,
    valFraction: data.val_fraction,
  };
}

/** The model a YAML model section describes, checked; a missing section is an error. */
function modelOfSection(m: ModelSection | undefined, file: string, fail: (key: string, message: string, hint: string) => never): ModelConfig {
  if (!m) return fail("model", "the config has no model section", "add a model: section (see models/nano-start.yaml), or start from trained weights with --init-from");
  const arch = m.arch ?? "llama";
  const model = resolveModelConfig({
    arch,
    vocabSize: m.vocab_size,
    hiddenSize: m.hidden_size,
    numLayers: m.num_layers,
    numHeads: m.num_heads,
    kvHeads: m.kv_heads ?? m.num_heads,
    maxSeqLen: m.max_seq_len,
    ...(m.intermediate_size === undefined ? {} : { intermediateSize: m.intermediate_size }),
    ...(m.rope_theta === undefined ? {} : { ropeTheta: m.rope_theta }),
    ...(m.norm_eps === undefined ? {} : { normEps: m.norm_eps }),
    ...(m.tie_embeddings === undefined ? {} : { tieEmbeddings: m.tie_embeddings }),
    ...(m.num_experts ? { numExperts: m.num_experts } : {}),
    ...(m.experts_per_tok === undefined ? {} : { expertsPerToken: m.experts_per_tok }),
    ...(m.shared_expert_enabled === undefined ? {} : { sharedExpert: m.shared_expert_enabled }),
    ...(m.kv_latent_dim ? { kvLatentDim: m.kv_latent_dim } : {}),
    ...(m.q_latent_dim ? { qLatentDim: m.q_latent_dim } : {}),
    ...(m.d_rope ? { ropeDim: m.d_rope } : {}),
    ...(m.mamba_layers?.length ? { mambaLayers: m.mamba_layers } : {}),
    ...(m.mamba2_num_heads === undefined ? {} : { mamba2NumHeads: m.mamba2_num_heads }),
    ...(m.mamba2_head_dim === undefined ? {} : { mamba2HeadDim: m.mamba2_head_dim }),
    ...(m.mamba2_state_size === undefined ? {} : { mamba2StateSize: m.mamba2_state_size }),
    ...(m.mamba2_chunk_size === undefined ? {} : { mamba2ChunkSize: m.mamba2_chunk_size }),
    ...(m.mamba2_n_groups === undefined ? {} : { mamba2NGroups: m.mamba2_n_groups }),
    ...(m.mamba2_conv_kernel === undefined ? {} : { mamba2ConvKernel: m.mamba2_conv_kernel }),
    ...(m.mamba2_expand === undefined ? {} : { mamba2Expand: m.mamba2_expand }),
  });
  const problem = modelConfigProblem(model);
  if (problem) fail(`model.${yamlKeyOf(problem.field)}`, problem.message, problem.hint);
  return model;
}
