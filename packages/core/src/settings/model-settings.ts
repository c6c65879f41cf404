import { z } from "zod";
import { ARCH_NAMES } from "../model/architectures.js";
import { LAYER_TYPES } from "../model/config.js";
import { nonNegativeInt, positiveInt, setting } from "./setting.js";

/**
 * `model:`, Oxidizr's key names where they exist. The model's shape has no flags: the
 * config file is the model (or --init-from brings it). Each key sets the ModelConfig field it names.
 */
export const MODEL_SETTINGS = {
  arch: setting("arch", z.enum(ARCH_NAMES).optional(), { help: "architecture: gpt2, llama, qwen2 (Llama with q/k/v biases), qwen3 (Llama with q/k norms per head), mistral (Llama with a sliding window) or gemma3 (Gemma 3 text) (default llama)" }),
  vocab_size: setting("vocabSize", positiveInt, { help: "token ids the model knows (at least the tokenizer's)" }),
  hidden_size: setting("hiddenSize", positiveInt, { help: "width of the residual stream", otherNames: ["n_embd", "d_model"] }),
  num_layers: setting("numLayers", positiveInt, { help: "transformer blocks", otherNames: ["n_layer", "num_hidden_layers"] }),
  num_heads: setting("numHeads", positiveInt, { help: "attention heads", otherNames: ["n_head", "num_attention_heads"] }),
  kv_heads: setting("kvHeads", positiveInt.optional(), { help: "key/value heads (grouped-query attention; default num_heads)", otherNames: ["num_key_value_heads"] }),
  head_dim: setting("headDim", positiveInt.optional(), { help: "attention head size (Llama family; default hidden_size / num_heads)" }),
  max_seq_len: setting("maxSeqLen", positiveInt, { help: "longest sequence the model takes", otherNames: ["n_positions", "max_position_embeddings"] }),
  intermediate_size: setting("intermediateSize", positiveInt.optional(), { help: "MLP inner width (default: GPT-2 4 x hidden, Llama's SwiGLU rule)" }),
  attention_bias: setting("attentionBias", z.boolean().optional(), { help: "biases on the q, k, v and o projections (Llama family; default false)" }),
  mlp_bias: setting("mlpBias", z.boolean().optional(), { help: "biases on the MLP's gate, up and down projections (Llama family, dense MLP; default false)" }),
  sliding_window: setting("slidingWindow", positiveInt.optional(), { help: "sliding-window attention: keys each query sees, its own included (mistral: every layer; qwen2, qwen3, gemma3: the layer_types marked sliding_attention)" }),
  layer_types: setting("layerTypes", z.array(z.enum(LAYER_TYPES)).optional(), { help: "per layer, full_attention or sliding_attention (qwen2, qwen3, gemma3; with sliding_window)" }),
  query_pre_attn_scalar: setting("queryPreAttnScalar", z.number().positive().optional(), { help: "gemma3: attention scores scaled by its -1/2 power (default head_dim)" }),
  rope_local_base_freq: setting("ropeLocalTheta", z.number().positive().optional(), { help: "gemma3: RoPE base of the sliding-window layers (default 10000; rope_theta is the full layers')" }),
  rope_theta: setting("ropeTheta", z.number().positive().optional(), { help: "RoPE base (Llama; default 10000)" }),
  norm_eps: setting("normEps", z.number().positive().optional(), { help: "LayerNorm / RMSNorm epsilon", otherNames: ["rms_norm_eps", "layer_norm_epsilon"] }),
  tie_embeddings: setting("tieEmbeddings", z.boolean().optional(), { help: "the output head shares the token embedding", otherNames: ["tie_word_embeddings"] }),
  num_experts: setting("numExperts", nonNegativeInt.optional(), { help: "mixture of experts (Llama): experts per MLP; 0 or absent = a dense MLP", zeroIsUnset: true }),
  experts_per_tok: setting("expertsPerToken", positiveInt.optional(), { help: "mixture of experts: experts each token is routed to (top-k; default 2)" }),
  shared_expert_enabled: setting("sharedExpert", z.boolean().optional(), { help: "mixture of experts: an expert every token goes through besides its routed ones" }),
  kv_latent_dim: setting("kvLatentDim", nonNegativeInt.optional(), { help: "multi-head latent attention (Llama): the key/value latent size; 0 or absent = ordinary attention", zeroIsUnset: true }),
  q_latent_dim: setting("qLatentDim", nonNegativeInt.optional(), { help: "multi-head latent attention: the query latent size; 0 or absent = a direct query projection", zeroIsUnset: true }),
  d_rope: setting("ropeDim", nonNegativeInt.optional(), { help: "multi-head latent attention: the RoPE slice of every query and key head", zeroIsUnset: true }),
  mamba_layers: setting("mambaLayers", z.array(nonNegativeInt).optional(), { help: "Mamba2 (Llama): the layers (from 0) whose mixer is Mamba2 instead of attention", zeroIsUnset: true }),
  mamba2_num_heads: setting("mamba2NumHeads", positiveInt.optional(), { help: "Mamba2 heads (default hidden x expand / head size)" }),
  mamba2_head_dim: setting("mamba2HeadDim", positiveInt.optional(), { help: "Mamba2 head size (default 64)" }),
  mamba2_state_size: setting("mamba2StateSize", positiveInt.optional(), { help: "Mamba2 state size per head (default 128)" }),
  mamba2_chunk_size: setting("mamba2ChunkSize", positiveInt.optional(), { help: "tokens per chunk of the SSD scan (default 256)" }),
  mamba2_n_groups: setting("mamba2NGroups", positiveInt.optional(), { help: "Mamba2 groups of heads sharing B and C (default 1)" }),
  mamba2_conv_kernel: setting("mamba2ConvKernel", positiveInt.optional(), { help: "Mamba2 causal convolution taps (default 4)" }),
  mamba2_expand: setting("mamba2Expand", positiveInt.optional(), { help: "Mamba2 inner width over hidden size (default 2)" }),
  mamba3_enabled: setting("mamba3Enabled", z.boolean().optional(), { help: "the mamba_layers are Mamba3 blocks (trapezoidal scan; sizes from the mamba2_* keys) instead of Mamba2" }),
  mamba3_complex_rope: setting("mamba3ComplexRope", z.boolean().optional(), { help: "Mamba3: rotate B and C by data-dependent angles (complex-valued state; default true; even state size)" }),
  mamba3_mimo_rank: setting("mamba3MimoRank", nonNegativeInt.optional(), { help: "Mamba3: MIMO rank, each head widened that many times for the scan (0 = SISO, the default)" }),
  mamba3_use_conv: setting("mamba3UseConv", z.boolean().optional(), { help: "Mamba3: the causal convolution on x, B and C as in Mamba2 (default false)" }),
} as const;
