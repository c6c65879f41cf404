import { z } from "zod";
import { LR_SCHEDULES } from "../optim/lr-schedule.js";
import { RECOMPUTE_SETTINGS } from "../train/recompute-choice.js";
import { TOKENIZER_NAMES } from "../data/tokenizer.js";
import { DEFAULT_VAL_FRACTION } from "../data/token-split.js";
import { DEFAULT_LOAD_BALANCE_ALPHA } from "../train/trainer.js";
import { DTYPE_SPELLINGS, trainingDTypeOf } from "./dtype-spellings.js";
import { nonNegativeInt, positiveInt, setting } from "./setting.js";

/** Where a run may train; "auto" takes the GPU when one is usable. */
export const TARGET_DEVICES = ["auto", "cpu", "gpu"] as const;
export type TargetDevice = (typeof TARGET_DEVICES)[number];

/** What a run does at a step whose loss or gradients are NaN or infinite. */
export const NONFINITE_POLICIES = ["stop", "skip"] as const;

/** Seconds a data-parallel collective waits for the other ranks by default. */
export const DEFAULT_SYNC_TIMEOUT_SECONDS = 300;

/**
 * Seconds a run stopped by SIGTERM waits for its step by default: what Kubernetes and Slurm
 * give a process between SIGTERM and SIGKILL (terminationGracePeriodSeconds, KillWait).
 */
export const DEFAULT_STOP_GRACE_SECONDS = 30;

/** Module names, from a YAML list or a comma-separated flag ("q_proj,v_proj"). */
const loraTargetList = z.preprocess(
  (v) => (typeof v === "string" ? v.split(",").map((t) => t.trim()) : v),
  z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "a module name such as q_proj")).min(1),
);

/** `trainer:`: Oxidizr's key names where they exist, plus kiln's. */
export const TRAINER_SETTINGS = {
  learning_rate: setting("lr", z.number().positive().default(3e-4), { help: "peak learning rate", flag: "--learning-rate <lr>", aliases: ["--lr"], page: true }),
  min_learning_rate: setting("minLr", z.number().nonnegative().optional(), { help: "learning rate at the end of the schedule (default: a tenth of the peak)", flag: "--min-learning-rate <lr>", otherNames: ["min_lr"], page: true }),
  lr_schedule: setting("schedule", z.enum(LR_SCHEDULES).default("cosine"), { help: "the learning rate after warmup: cosine, linear or constant", flag: "--lr-schedule <schedule>", otherNames: ["lr_scheduler_type"], page: true }),
  warmup_steps: setting("warmupSteps", nonNegativeInt.default(0), { help: "steps of linear warmup", flag: "--warmup-steps <n>", otherNames: ["warmup_iters"], page: true }),
  batch_size: setting("batchSize", positiveInt.default(8), { help: "micro-batch size", flag: "--batch-size <n>", otherNames: ["per_device_train_batch_size", "train_batch_size"], also: ["estimate"], page: true }),
  seq_len: setting("seqLen", positiveInt.optional(), { help: "tokens per sequence (<= model.max_seq_len; default model.max_seq_len)", flag: "--seq-len <n>", otherNames: ["max_length", "max_seq_length", "block_size"], also: ["estimate"], page: true }),
  gradient_accumulation: setting("gradAccum", positiveInt.default(1), { help: "micro-batches per optimizer step", flag: "--grad-accum <n>", aliases: ["--gradient-accumulation"], otherNames: ["gradient_accumulation_steps"], also: ["estimate"], page: true }),
  max_steps: setting("maxSteps", positiveInt.optional(), { help: "optimizer steps to train for (with num_epochs too: whichever ends first; a flag sets aside the file's limits)", flag: "--max-steps <n>", otherNames: ["max_iters"], page: true }),
  num_epochs: setting("numEpochs", z.number().positive().optional(), { help: "passes over the data (with max_steps too: whichever ends first; a flag sets aside the file's limits)", flag: "--num-epochs <x>", aliases: ["--epochs"], otherNames: ["num_train_epochs"], page: true }),
  weight_decay: setting("weightDecay", z.number().nonnegative().default(0.1), { help: "AdamW weight decay", flag: "--weight-decay <x>", page: true }),
  beta1: setting("beta1", z.number().min(0).lt(1).default(0.9), { help: "AdamW beta1", flag: "--beta1 <x>", otherNames: ["adam_beta1"], page: true }),
  beta2: setting("beta2", z.number().min(0).lt(1).default(0.95), { help: "AdamW beta2", flag: "--beta2 <x>", otherNames: ["adam_beta2"], page: true }),
  eps: setting("eps", z.number().positive().default(1e-8), { help: "AdamW epsilon", flag: "--eps <x>", otherNames: ["adam_epsilon"], page: true }),
  grad_clip: setting("gradClip", z.number().nonnegative().default(1.0), { help: "clip gradients to this global norm (0: no clipping)", flag: "--grad-clip <x>", otherNames: ["max_grad_norm"], page: true }),
  recompute: setting("recompute", z.enum(RECOMPUTE_SETTINGS).default("auto"), {
    help: "recompute activations in backward: auto (none on a GPU where everything fits, else cheap), none, cheap (GELU/norms), blocks (checkpointing)",
    flag: "--recompute <policy>",
    also: ["estimate"],
    page: true,
  }),
  target_device: setting("targetDevice", z.enum(TARGET_DEVICES).default("auto"), {
    help: "where to train: auto (the GPU when usable), cpu or gpu; kiln estimate also takes a GPU of its table (h100, a100-80, ...)",
    flag: "--target-device <device>",
    aliases: ["--device"],
    also: ["estimate"],
  }),
  dtype: setting("dtype", z.enum(DTYPE_SPELLINGS).transform((v) => trainingDTypeOf(v)!).default("f32"), {
    help: "training dtype: f32, bf16, f16 (with loss scaling) or auto (bf16 where the device runs it, else f16, else f32); bfloat16, fp16 and the like are taken too",
    flag: "--dtype <dtype>",
    switches: { "--bf16": "bf16", "--fp16": "f16" },
    also: ["estimate"],
    page: true,
  }),
  tf32: setting("tf32", z.boolean().default(false), { help: "allow TF32 for f32 matmuls (the GPU's cuBLASLt path; no effect elsewhere)", flag: "--tf32" }),
  cuda_graphs: setting("cudaGraphs", z.boolean().default(false), {
    help: "GPU: record each micro-batch's forward and backward once as a CUDA graph and launch it whole (one host call instead of hundreds: for small models)",
    flag: "--cuda-graphs",
  }),
  on_nonfinite: setting("onNonFinite", z.enum(NONFINITE_POLICIES).default("stop"), { help: "a step whose loss or gradients are NaN or infinite: stop (default) or skip it", flag: "--on-nonfinite <policy>", page: true }),
  sync_timeout: setting("syncTimeout", z.number().positive().default(DEFAULT_SYNC_TIMEOUT_SECONDS), {
    help: "data parallel: seconds a rank waits for the others before the run stops naming the missing rank",
    flag: "--sync-timeout <seconds>",
  }),
  pack: setting("pack", z.boolean().default(false), {
    help: "example data (chat, instruct): pack consecutive examples into each row, attention and positions kept inside each example, instead of one example a row padded",
    flag: "--pack",
    otherNames: ["sample_packing"],
  }),
  shard_optimizer: setting("shardOptimizer", z.boolean().default(false), {
    help: "data parallel: split AdamW's state (and the f32 master weights under bf16/f16) over the ranks, each updating its share (ZeRO stage 1)",
    flag: "--shard-optimizer",
    also: ["estimate"],
  }),
  bucket_mb: setting("bucketMb", z.number().positive().default(25), { help: "data parallel: MiB of gradients per all-reduce bucket (PyTorch DDP's bucket_cap_mb)", flag: "--bucket-mb <mib>", aliases: ["--bucket-cap-mb"] }),
  load_balance_alpha: setting("loadBalanceAlpha", z.number().nonnegative().default(DEFAULT_LOAD_BALANCE_ALPHA), {
    help: "mixture of experts: weight of the load-balancing loss added to the cross-entropy",
    flag: "--load-balance-alpha <x>",
    page: true,
  }),
  lora_rank: setting("loraRank", nonNegativeInt.default(0), {
    help: "train LoRA adapters of this rank on the base weights, which stay frozen (0: train every weight)",
    flag: "--lora-rank <r>",
    otherNames: ["lora_r"],
    also: ["estimate"],
  }),
  lora_alpha: setting("loraAlpha", z.number().positive().optional(), { help: "LoRA's alpha: the adapters' product is scaled by alpha / rank (default 2 x rank)", flag: "--lora-alpha <a>", also: ["estimate"] }),
  lora_targets: setting("loraTargets", loraTargetList.optional(), {
    help: "module names LoRA wraps, comma-separated (default: the attention and MLP projections, q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj; GPT-2 c_attn,c_proj,c_fc)",
    flag: "--lora-targets <modules>",
    otherNames: ["target_modules"],
    also: ["estimate"],
  }),
  lora_dropout: setting("loraDropout", z.number().min(0).lt(1).default(0), { help: "LoRA: dropout on each adapter's input while training (PEFT's lora_dropout; 0.05 and 0.1 are usual)", flag: "--lora-dropout <p>", also: ["estimate"] }),
  seed: setting("seed", nonNegativeInt.default(1337), { help: "seed for initialisation and data order", flag: "--seed <n>", page: true }),
  prefetch: setting("prefetch", nonNegativeInt.default(2), { help: "batches read ahead of compute", flag: "--prefetch <n>", also: ["estimate"], page: true }),
  log_interval: setting("logInterval", positiveInt.default(10), { help: "steps between log lines", flag: "--log-interval <n>", otherNames: ["logging_steps"], page: true }),
  eval_interval: setting("evalInterval", positiveInt.default(200), { help: "steps between validation runs", flag: "--eval-interval <n>", otherNames: ["eval_steps"], page: true }),
  eval_iters: setting("evalIters", positiveInt.default(10), { help: "batches per validation run", flag: "--eval-iters <n>", page: true }),
  save_best: setting("saveBest", z.boolean().default(false), { help: "keep the checkpoint with the lowest val_loss as best.safetensors", flag: "--save-best", otherNames: ["load_best_model_at_end"] }),
  early_stop: setting("earlyStop", positiveInt.optional(), { help: "stop after N evaluations without a lower val_loss", flag: "--early-stop <n>", aliases: ["--early-stopping-patience"], page: true }),
  save_interval: setting("saveInterval", positiveInt.default(500), { help: "steps between checkpoints", flag: "--save-interval <n>", otherNames: ["save_steps"] }),
  max_checkpoints: setting("maxCheckpoints", positiveInt.default(5), { help: "keep only the newest N step checkpoints", flag: "--max-checkpoints <n>", otherNames: ["save_total_limit"] }),
  stop_grace: setting("stopGrace", z.number().nonnegative().default(DEFAULT_STOP_GRACE_SECONDS), {
    help: "seconds a run stopped by SIGTERM or SIGHUP gives the step under way before it exits without saving that step (its newest checkpoint stays loadable); after the step it saves and exits 143 (129 for SIGHUP)",
    flag: "--stop-grace <seconds>",
  }),
  checkpoint_dir: setting("checkpointDir", z.string().min(1).optional(), {
    help: "checkpoints and metrics.jsonl (default: checkpoints/<config name>)",
    flag: "--output-dir <dir>",
    aliases: ["--checkpoint-dir"],
    otherNames: ["output_dir", "out_dir"],
  }),
} as const;

/** `data:`: where tokens come from. */
export const DATA_SETTINGS = {
  path: setting("dataPath", z.string().min(1).optional(), { help: "token file (u32 .bin or llm.c shard); default: the built-in corpus", flag: "-d, --data <tokens.bin>", aliases: ["--data-path"] }),
  tokenizer: setting("tokenizer", z.enum(TOKENIZER_NAMES).optional(), { help: "tokenizer of the data (the built-in corpus is tokenized with it)", flag: "--tokenizer <name>", page: true }),
  val_fraction: setting("valFraction", z.number().min(0).lt(1).default(DEFAULT_VAL_FRACTION), { help: "share of the tokens held out for validation", flag: "--val-fraction <x>", page: true }),
} as const;
