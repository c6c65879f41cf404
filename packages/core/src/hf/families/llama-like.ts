import { LAYER_TYPES, type LayerType, type ModelConfig, type ModelConfigInput, headDim } from "../../model/config.js";
import type { HfConfigReader, Json } from "../hf-config-reader.js";
import { readRope, ropeKeys } from "./rope-keys.js";

type LlamaLikeArch = "llama" | "qwen2" | "qwen3" | "mistral" | "gemma3";

/**
 * The keys every Llama-like config.json shares (LlamaConfig, Qwen2Config, Qwen3Config,
 * MistralConfig): the SiLU MLP, the sizes (readSizes) and RoPE.
 */
export function readLlamaLike(r: HfConfigReader, arch: LlamaLikeArch): ModelConfigInput {
  r.expect("hidden_act", "silu", "silu", "SwiGLU MLP");
  return { ...readSizes(r, arch), ...readRope(r) };
}

/** Sizes, heads (head_dim where given), RMSNorm epsilon and tying, in the Llama family's keys. */
export function readSizes(r: HfConfigReader, arch: LlamaLikeArch): ModelConfigInput {
  const heads = r.int("num_attention_heads");
  const hidden = r.int("hidden_size");
  // Qwen3 and Gemma 3 (and some Llamas) size heads apart from hidden_size / num_attention_heads.
  const head = r.has("head_dim") ? r.int("head_dim") : hidden / heads;
  return {
    arch,
    vocabSize: r.int("vocab_size"),
    hiddenSize: hidden,
    numLayers: r.int("num_hidden_layers"),
    numHeads: heads,
    ...(head !== hidden / heads ? { headDim: head } : {}),
    kvHeads: r.int("num_key_value_heads", heads),
    maxSeqLen: r.int("max_position_embeddings"),
    intermediateSize: r.int("intermediate_size"),
    normEps: r.num("rms_norm_eps", 1e-6),
    tieEmbeddings: r.bool("tie_word_embeddings", arch === "gemma3"),
  };
}

/** The keys transformers writes for every Llama-like class, in its order (alphabetical). */
export function writeLlamaLike(m: ModelConfig, common: Json): Json {
  return {
    attention_dropout: 0.0,
    ...common,
    head_dim: headDim(m),
    hidden_act: "silu",
    hidden_size: m.hiddenSize,
    initializer_range: 0.02,
    intermediate_size: m.intermediateSize,
    max_position_embeddings: m.maxSeqLen,
    num_attention_heads: m.numHeads,
    num_hidden_layers: m.numLayers,
    num_key_value_heads: m.kvHeads,
    rms_norm_eps: m.normEps,
    ...ropeKeys(m),
    tie_word_embeddings: m.tieEmbeddings,
    use_cache: true,
    vocab_size: m.vocabSize,
  };
}

/**
 * Qwen2's and Qwen3's window: only with use_sliding_window, in the layers layer_types
 * marks sliding_attention, or (configs without layer_types) those from max_window_layers on.
 */
export function readQwenWindow(r: HfConfigReader, numLayers: number): Pick<ModelConfig, "slidingWindow" | "layerTypes"> {
  if (!r.bool("use_sliding_window", false)) return {};
  const window = r.int("sliding_window");
  const types = readLayerTypes(r, numLayers);
  if (types === undefined) {
    const from = r.int("max_window_layers", 28);
    return { slidingWindow: window, layerTypes: Array.from({ length: numLayers }, (_, i) => (i >= from ? "sliding_attention" : "full_attention")) };
  }
  return { slidingWindow: window, layerTypes: types };
}

/** config.json's layer_types, one of full_attention / sliding_attention per layer; undefined when absent. */
export function readLayerTypes(r: HfConfigReader, numLayers: number): LayerType[] | undefined {
  const types = r.json.layer_types;
  if (types === undefined || types === null) return undefined;
  if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => (LAYER_TYPES as readonly unknown[]).includes(t))) {
    return r.fail("layer_types", `layer_types is ${JSON.stringify(types)}, not one of ${LAYER_TYPES.join(" / ")} for each of the ${numLayers} layers`, "fix the value in config.json");
  }
  return types as LayerType[];
}

/**
 * Qwen2's and Qwen3's window keys: layer_types per layer, max_window_layers the first
 * sliding layer (the layer count when none slides: its meaning for older readers).
 */
export function qwenWindowKeys(m: ModelConfig): Json {
  const types: LayerType[] = Array.from({ length: m.numLayers }, (_, i) => (m.slidingWindow !== undefined && (m.layerTypes?.[i] ?? "sliding_attention") === "sliding_attention" ? "sliding_attention" : "full_attention"));
  const first = types.indexOf("sliding_attention");
  return {
    layer_types: types,
    max_window_layers: first < 0 ? m.numLayers : first,
    sliding_window: m.slidingWindow ?? null,
    use_sliding_window: m.slidingWindow !== undefined,
  };
}
