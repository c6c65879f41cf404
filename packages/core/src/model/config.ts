import type { RopeScaling } from "@kiln/contract";
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
  /**
   * Query/key/value head size (Llama family) when it is not hiddenSize / numHeads (Qwen3,
   * Gemma 3: q_proj is (numHeads * headDim, hiddenSize)). Absent: hiddenSize / numHeads.
   */
  headDim?: number;
  /** Biases on the q, k, v and o projections (Llama's attention_bias). */
  attentionBias?: boolean;
  /** Biases on the gate, up and down projections of the dense MLP (Llama's mlp_bias). */
  mlpBias?: boolean;
  /**
   * Sliding-window attention: a query sees the last slidingWindow keys, its own included
   * (Mistral's sliding_window), in the layers layerTypes marks "sliding_attention" (every
   * attention layer without layerTypes). Absent: full causal attention everywhere.
   */
  slidingWindow?: number;
  /** Per layer, "sliding_attention" or "full_attention" (transformers' layer_types). */
  layerTypes?: LayerType[];
  /** Attention scores scaled by queryPreAttnScalar^-1/2 in place of headDim^-1/2 (Gemma 3's query_pre_attn_scalar). */
  queryPreAttnScalar?: number;
  /** RoPE base of the sliding-window layers, unscaled (Gemma 3's rope_local_base_freq); ropeTheta and ropeScaling are the full layers'. */
  ropeLocalTheta?: number;
  /** RoPE base (Llama). */
  ropeTheta: number;
  /** RoPE frequency scaling (Llama 3.x's `llama3`, or `linear`); absent: none. */
  ropeScaling?: RopeScaling;
  /** LayerNorm / RMSNorm epsilon. */
  normEps: number;
  /** lm_head shares the token embedding. */
  tieEmbeddings: boolean;
  /**
   * Mixture of experts (Llama): the MLP of every layer becomes `numExperts` SwiGLU experts of
   * `intermediateSize`, each token routed to its top `expertsPerToken`. Absent or 0: a dense MLP.
   */
  numExperts?: number;
  /** Experts each token goes through (top-k routing); default 2 (1 with a single expert). */
  expertsPerToken?: number;
  /** An extra SwiGLU expert of `intermediateSize` that every token goes through, unweighted. */
  sharedExpert?: boolean;
  /**
   * Multi-head Latent Attention (Llama layers, DeepSeek-V2): keys and values from a latent of
   * this size. Absent or 0: ordinary attention. kvHeads does not apply then: every head has its keys.
   */
  kvLatentDim?: number;
  /** MLA: queries through a latent of this size too; absent or 0: a direct query projection. */
  qLatentDim?: number;
  /** MLA: the RoPE slice added to every query and key head (one RoPE key shared by all heads). */
  ropeDim?: number;
  /**
   * Mamba2 (Llama layers): the indices (from 0) of the layers whose mixer is a Mamba2 block in
   * place of attention; the other layers keep attention. Absent or empty: no Mamba2 layers.
   */
  mambaLayers?: number[];
  /** Mamba2 heads; default hidden·expand / headDim. */
  mamba2NumHeads?: number;
  /** Mamba2 head size; default 64 (or hidden·expand / heads when the heads are given). */
  mamba2HeadDim?: number;
  /** Mamba2 state size per head (N); default 128. */
  mamba2StateSize?: number;
  /** Tokens per chunk of the SSD scan; default 256. */
  mamba2ChunkSize?: number;
  /** Groups of heads sharing B and C; default 1. */
  mamba2NGroups?: number;
  /** Taps of the causal convolution; default 4. */
  mamba2ConvKernel?: number;
  /** Inner width over hidden size; default 2. */
  mamba2Expand?: number;
  /**
   * Mamba3 (Oxidizr's keys): the layers mambaLayers lists are Mamba3 blocks (the trapezoidal
   * scan, B/C norms and biases) with the mamba2_* sizes, instead of Mamba2 blocks.
   */
  mamba3Enabled?: boolean;
  /** Mamba3: the data-dependent rotation of B and C (complex-valued states); default true. */
  mamba3ComplexRope?: boolean;
  /** Mamba3: MIMO rank R, each head's channels widened R times for the scan; 0 (default) is SISO. */
  mamba3MimoRank?: number;
  /** Mamba3: the causal convolution on x, B and C as in Mamba2; default false. */
  mamba3UseConv?: boolean;
  /**
   * Low-rank adapters (LoRA): every weight whose module name is one of `targets` gets
   * y = W·x + (alpha / rank)·B·(A·x), A (rank, in) and B (out, rank) trained, the rest
   * of the model frozen. Absent: every weight trains.
   */
  lora?: LoraConfig;
}

/** LoRA's shape: the rank of each adapter, its alpha (the branch is scaled by alpha / rank), the module names it wraps. */
export interface LoraConfig {
  rank: number;
  alpha: number;
  /** Module names (the last part before `.weight`: q_proj, c_attn, ...). */
  targets: string[];
  /** Dropout on each adapter's input while training (PEFT's lora_dropout); absent: 0. */
  dropout?: number;
}

export const LAYER_TYPES = ["full_attention", "sliding_attention"] as const;
export type LayerType = (typeof LAYER_TYPES)[number];

export type ModelConfigInput = Pick<ModelConfig, "arch" | "vocabSize" | "hiddenSize" | "numLayers" | "numHeads" | "maxSeqLen"> & Partial<ModelConfig>;

/** The RoPE kernels' base and scaling for this model. */
export const ropeFrequencies = (c: ModelConfig) => ({ theta: c.ropeTheta, ...(c.ropeScaling ? { scaling: c.ropeScaling } : {}) });

/** Keys a query of layer i sees (its sliding window), or undefined for full causal attention. */
export function attentionWindow(c: ModelConfig, layer: number): number | undefined {
  if (c.slidingWindow === undefined) return undefined;
  return c.layerTypes === undefined || c.layerTypes[layer] === "sliding_attention" ? c.slidingWindow : undefined;
}

/** Attention head size: the explicit headDim, else hiddenSize / numHeads. */
export const headDim = (c: ModelConfig) => c.headDim ?? c.hiddenSize / c.numHeads;

/** The mixture-of-experts settings of `c`, or undefined for a dense MLP. */
export function moeOf(c: ModelConfig): { numExperts: number; topK: number; shared: boolean } | undefined {
  if (!c.numExperts) return undefined;
  return { numExperts: c.numExperts, topK: c.expertsPerToken ?? Math.min(2, c.numExperts), shared: c.sharedExpert ?? false };
}

/** The Mamba2 settings of `c` with defaults filled, or undefined when no layer is Mamba2. */
export function mambaOf(c: ModelConfig) {
  if (!c.mambaLayers || c.mambaLayers.length === 0) return undefined;
  const expand = c.mamba2Expand ?? 2;
  const inner = c.hiddenSize * expand;
  const headDim = c.mamba2HeadDim ?? (c.mamba2NumHeads ? inner / c.mamba2NumHeads : 64);
  const heads = c.mamba2NumHeads ?? inner / headDim;
  return {
    layers: new Set(c.mambaLayers),
    expand,
    inner,
    heads,
    headDim,
    stateSize: c.mamba2StateSize ?? 128,
    chunkSize: c.mamba2ChunkSize ?? 256,
    groups: c.mamba2NGroups ?? 1,
    convKernel: c.mamba2ConvKernel ?? 4,
  };
}

export type MambaSettings = NonNullable<ReturnType<typeof mambaOf>>;

/** The Mamba3 settings of `c` with defaults filled, or undefined when its Mamba layers are Mamba2 (or there are none). */
export function mamba3Of(c: ModelConfig) {
  const m = mambaOf(c);
  if (!m || !c.mamba3Enabled) return undefined;
  const mimoRank = c.mamba3MimoRank ?? 0;
  return { ...m, rope: c.mamba3ComplexRope ?? true, mimoRank, useConv: c.mamba3UseConv ?? false, scanHeadDim: m.headDim * Math.max(1, mimoRank) };
}

export type Mamba3Settings = NonNullable<ReturnType<typeof mamba3Of>>;
