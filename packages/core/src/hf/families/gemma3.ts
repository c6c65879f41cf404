import { type LayerType, type ModelConfig, headDim } from "../../model/config.js";
import type { HfConfigReader, Json } from "../hf-config-reader.js";
import type { HfFamily } from "./hf-family.js";
import { readLayerTypes, readSizes } from "./llama-like.js";
import { ropeScalingOf, scalingKeys } from "./rope-keys.js";

const GELU_TANH = "gelu_pytorch_tanh";

/**
 * Gemma 3's RoPE: full layers at rope_theta with rope_scaling, sliding layers at
 * rope_local_base_freq unscaled; transformers 5 nests both in rope_parameters by layer type.
 */
function readGemmaRope(r: HfConfigReader): Pick<ModelConfig, "ropeTheta" | "ropeScaling" | "ropeLocalTheta"> {
  const nested = r.object("rope_parameters");
  const full = nested ? (nested.full_attention as Json | undefined) : undefined;
  const sliding = nested ? (nested.sliding_attention as Json | undefined) : undefined;
  const theta = (key: string, v: unknown, fallback: number): number => {
    const t = v ?? fallback;
    return typeof t === "number" && t > 0 ? t : r.fail(key, `${key} is ${JSON.stringify(t)}, not a positive number`, "fix the value in config.json");
  };
  const ropeTheta = theta(full ? "rope_parameters.full_attention.rope_theta" : "rope_theta", full?.rope_theta ?? r.json.rope_theta, 1_000_000);
  const ropeLocalTheta = theta(sliding ? "rope_parameters.sliding_attention.rope_theta" : "rope_local_base_freq", sliding?.rope_theta ?? r.json.rope_local_base_freq, 10_000);
  const scaling = full ? ropeScalingOf(r, "rope_parameters.full_attention", full) : ropeScalingOf(r, "rope_scaling", r.object("rope_scaling"));
  if (sliding && ropeScalingOf(r, "rope_parameters.sliding_attention", sliding)) {
    r.fail("rope_parameters.sliding_attention.rope_type", "RoPE scaling on Gemma 3's sliding layers is not one kiln computes", "keep rope_type default for sliding_attention");
  }
  return { ropeTheta, ropeLocalTheta, ...(scaling ? { ropeScaling: scaling } : {}) };
}

/** layer_types, or the older sliding_window_pattern: every pattern-th layer full, the others sliding. */
function gemmaLayerTypes(r: HfConfigReader, numLayers: number): LayerType[] {
  const listed = readLayerTypes(r, numLayers);
  if (listed) return listed;
  const pattern = r.int("sliding_window_pattern", 6);
  return Array.from({ length: numLayers }, (_, i) => ((i + 1) % pattern ? "sliding_attention" : "full_attention"));
}

/** The pattern p (every p-th layer full) that gives `types`, if one does. */
function patternOf(types: LayerType[]): number | undefined {
  for (let p = 1; p <= types.length + 1; p++) {
    if (types.every((t, i) => t === ((i + 1) % p ? "sliding_attention" : "full_attention"))) return p;
  }
  return undefined;
}

/** Gemma3ForCausalLM (model_type gemma3_text: Gemma 3 270M and 1B, the text model alone). */
export const gemma3Hf: HfFamily = {
  architecture: "Gemma3ForCausalLM",
  modelType: "gemma3_text",
  read(r) {
    const activation = r.json.hidden_activation ?? r.json.hidden_act ?? GELU_TANH;
    if (activation !== GELU_TANH) r.fail("hidden_activation", `hidden_activation is ${JSON.stringify(activation)}; kiln's Gemma 3 MLP gates with ${GELU_TANH}`, "kiln cannot represent this model");
    r.expect("final_logit_softcapping", null, null, "no tanh cap on the logits");
    r.expect("attn_logit_softcapping", null, null, "no tanh cap on the attention scores");
    r.expect("use_bidirectional_attention", false, false, "causal attention");
    const base = readSizes(r, "gemma3");
    const numLayers = base.numLayers;
    const attentionBias = r.bool("attention_bias", false);
    const layerTypes = gemmaLayerTypes(r, numLayers);
    const slides = layerTypes.includes("sliding_attention");
    return {
      ...base,
      ...readGemmaRope(r),
      queryPreAttnScalar: r.num("query_pre_attn_scalar", 256),
      layerTypes,
      ...(slides ? { slidingWindow: r.int("sliding_window") } : {}),
      ...(attentionBias ? { attentionBias } : {}),
    };
  },
  write(m, common) {
    const types: LayerType[] = m.layerTypes ?? Array.from({ length: m.numLayers }, () => (m.slidingWindow !== undefined ? "sliding_attention" : "full_attention"));
    const scaling = scalingKeys(m.ropeScaling);
    const local = m.ropeLocalTheta ?? 10_000;
    const pattern = patternOf(types);
    return {
      architectures: ["Gemma3ForCausalLM"],
      model_type: "gemma3_text",
      attention_bias: m.attentionBias ?? false,
      attention_dropout: 0.0,
      attn_logit_softcapping: null,
      ...common,
      final_logit_softcapping: null,
      head_dim: headDim(m),
      hidden_activation: GELU_TANH,
      hidden_size: m.hiddenSize,
      initializer_range: 0.02,
      intermediate_size: m.intermediateSize,
      layer_types: types,
      max_position_embeddings: m.maxSeqLen,
      num_attention_heads: m.numHeads,
      num_hidden_layers: m.numLayers,
      num_key_value_heads: m.kvHeads,
      query_pre_attn_scalar: m.queryPreAttnScalar ?? headDim(m),
      rms_norm_eps: m.normEps,
      rope_parameters: {
        full_attention: { ...(scaling ?? { rope_type: "default" }), rope_theta: m.ropeTheta },
        sliding_attention: { rope_type: "default", rope_theta: local },
      },
      rope_local_base_freq: local,
      rope_scaling: scaling,
      rope_theta: m.ropeTheta,
      sliding_window: m.slidingWindow ?? null,
      ...(pattern !== undefined ? { sliding_window_pattern: pattern } : {}),
      tie_word_embeddings: m.tieEmbeddings,
      use_bidirectional_attention: false,
      use_cache: true,
      vocab_size: m.vocabSize,
    };
  },
};
