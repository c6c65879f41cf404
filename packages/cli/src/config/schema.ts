import { TARGET_DEVICES } from "../train/open-backend.js";
import { DTYPE_SPELLINGS } from "./dtype-choice.js";
import { DEFAULT_SYNC_TIMEOUT_S } from "@kiln/distributed";
import { ARCH_NAMES, DEFAULT_LOAD_BALANCE_ALPHA, TOKENIZER_NAMES } from "@kiln/core";
import { z } from "zod";

const positiveInt = z.number().int().positive();
const nonNegativeInt = z.number().int().nonnegative();

/** `model:` — Oxidizr's field names where they exist (arch defaults to llama in resolveSettings). */
export const modelSchema = z
  .object({
    arch: z.enum(ARCH_NAMES).optional(),
    vocab_size: positiveInt,
    hidden_size: positiveInt,
    num_layers: positiveInt,
    num_heads: positiveInt,
    kv_heads: positiveInt.optional(),
    max_seq_len: positiveInt,
    intermediate_size: positiveInt.optional(),
    rope_theta: z.number().positive().optional(),
    norm_eps: z.number().positive().optional(),
    tie_embeddings: z.boolean().optional(),
    /** Mixture of experts (Llama): experts per MLP; absent or 0 = a dense MLP. */
    num_experts: nonNegativeInt.optional(),
    /** Experts each token is routed to (top-k). */
    experts_per_tok: positiveInt.optional(),
    /** An expert every token goes through besides its routed ones. */
    shared_expert_enabled: z.boolean().optional(),
    /** Multi-head latent attention (Llama): the key/value latent size; absent or 0 = ordinary attention. */
    kv_latent_dim: nonNegativeInt.optional(),
    /** Multi-head latent attention: the query latent size; absent or 0 = a direct query projection. */
    q_latent_dim: nonNegativeInt.optional(),
    /** Multi-head latent attention: the RoPE slice of every query and key head. */
    d_rope: nonNegativeInt.optional(),
    /** Mamba2 (Llama): the layers (from 0) whose mixer is Mamba2 instead of attention. */
    mamba_layers: z.array(nonNegativeInt).optional(),
    mamba2_num_heads: positiveInt.optional(),
    mamba2_head_dim: positiveInt.optional(),
    mamba2_state_size: positiveInt.optional(),
    mamba2_chunk_size: positiveInt.optional(),
    mamba2_n_groups: positiveInt.optional(),
    mamba2_conv_kernel: positiveInt.optional(),
    mamba2_expand: positiveInt.optional(),
  })
  .strict();

/** `trainer:` — Oxidizr's field names where they exist, plus kiln's. */
export const trainerSchema = z
  .object({
    learning_rate: z.number().positive().default(3e-4),
    min_learning_rate: z.number().nonnegative().optional(),
    batch_size: positiveInt.default(8),
    seq_len: positiveInt.optional(),
    max_steps: positiveInt.optional(),
    num_epochs: z.number().positive().optional(),
    gradient_accumulation: positiveInt.default(1),
    checkpoint_dir: z.string().min(1).optional(),
    log_interval: positiveInt.default(10),
    save_interval: positiveInt.default(500),
    max_checkpoints: positiveInt.default(5),
    eval_interval: positiveInt.default(200),
    eval_iters: positiveInt.default(10),
    /** Keep the checkpoint with the lowest val_loss as best.safetensors. */
    save_best: z.boolean().default(false),
    /** Stop after this many evaluations without a lower val_loss. */
    early_stop: positiveInt.optional(),
    warmup_steps: nonNegativeInt.default(0),
    lr_schedule: z.enum(["cosine", "linear", "constant"]).default("cosine"),
    weight_decay: z.number().nonnegative().default(0.1),
    beta1: z.number().min(0).lt(1).default(0.9),
    beta2: z.number().min(0).lt(1).default(0.95),
    eps: z.number().positive().default(1e-8),
    grad_clip: z.number().nonnegative().default(1.0),
    target_device: z.enum(TARGET_DEVICES).default("auto"),
    /** f32, bf16, f16 or auto (other spellings such as bfloat16 and fp16 are accepted). */
    dtype: z.enum(DTYPE_SPELLINGS as [string, ...string[]]).default("f32"),
    /** Allow TF32 matmuls on CUDA (f32 training only takes them). */
    tf32: z.boolean().default(false),
    /** CUDA: each micro-batch's forward and backward recorded once as a CUDA graph and launched whole. */
    cuda_graphs: z.boolean().default(false),
    seed: nonNegativeInt.default(1337),
    prefetch: nonNegativeInt.default(2),
    /** auto: keep every activation on a GPU where that fits, else recompute the element-wise ones (core's resolveRecompute). */
    recompute: z.enum(["auto", "none", "cheap", "blocks"]).default("auto"),
    /** A step whose loss or gradients are NaN or infinite: stop the run (default) or skip the step. */
    on_nonfinite: z.enum(["stop", "skip"]).default("stop"),
    /** Data parallel: seconds a collective may wait for the other ranks before the run stops, naming the rank that did not come. */
    sync_timeout: z.number().positive().default(DEFAULT_SYNC_TIMEOUT_S),
    /** Mixture of experts: weight of the load-balancing loss added to the cross-entropy. */
    load_balance_alpha: z.number().nonnegative().default(DEFAULT_LOAD_BALANCE_ALPHA),
    /** Data parallel: MiB of gradients per all-reduce bucket (PyTorch DDP's bucket_cap_mb). */
    bucket_mb: z.number().positive().default(25),
  })
  .strict();

/** `data:` — where tokens come from (the CLI's -d overrides `path`). */
export const dataSchema = z
  .object({
    path: z.string().min(1).optional(),
    tokenizer: z.enum(TOKENIZER_NAMES).optional(),
    val_fraction: z.number().min(0).lt(1).default(0.01),
  })
  .strict();

export const configSchema = z
  .object({
    /** Optional only with --init-from, whose model it must then agree with. */
    model: modelSchema.optional(),
    trainer: trainerSchema.default(trainerSchema.parse({})),
    data: dataSchema.default(dataSchema.parse({})),
  })
  .strict();

export type KilnConfig = z.infer<typeof configSchema>;
export type ModelSection = z.infer<typeof modelSchema>;
export type TrainerSection = z.infer<typeof trainerSchema>;

/** Every key each section accepts (for did-you-mean). */
export const KNOWN_KEYS: Record<string, readonly string[]> = {
  "": Object.keys(configSchema.shape),
  model: Object.keys(modelSchema.shape),
  trainer: Object.keys(trainerSchema.shape),
  data: Object.keys(dataSchema.shape),
};
