import { CheckpointError, type RopeScaling } from "@kiln/contract";
import { type Arch, modelConfigProblem, resolveModelConfig } from "../model/architectures.js";
import { type ModelConfig, headDim } from "../model/config.js";

/** What transformers calls each architecture kiln trains. */
export const HF_ARCHITECTURES = { gpt2: "GPT2LMHeadModel", llama: "LlamaForCausalLM", qwen2: "Qwen2ForCausalLM" } as const satisfies Record<Arch, string>;

/** GPT-2's GELU is the tanh approximation; transformers names it either way. */
const GPT2_ACTIVATIONS = ["gelu_new", "gelu_pytorch_tanh"];

type Json = Record<string, unknown>;

/**
 * The kiln model a Hugging Face config.json describes (GPT2LMHeadModel, LlamaForCausalLM or
 * Qwen2ForCausalLM). Anything kiln's forward pass does not compute (RoPE scaling other than
 * llama3 and linear, Qwen2's sliding window, another activation, ...) is refused by key.
 */
export function modelConfigFromHf(json: unknown, file: string): ModelConfig {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new CheckpointError("config.json is not a JSON object", { where: file, hint: "a Hugging Face model folder's config.json holds one object of settings" });
  }
  const c = json as Json;
  const fail = (key: string, what: string, hint: string): never => {
    throw new CheckpointError(what, { where: `${file} (${key})`, hint });
  };
  const int = (key: string, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (v === undefined) return fail(key, `${key} is missing`, "a config.json written by transformers has it; add it or re-save the model");
    if (!Number.isSafeInteger(v) || (v as number) < 1) return fail(key, `${key} is ${JSON.stringify(v)}, not a positive integer`, "fix the value in config.json");
    return v as number;
  };
  const num = (key: string, fallback: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== "number" || !(v > 0)) return fail(key, `${key} is ${JSON.stringify(v)}, not a positive number`, "fix the value in config.json");
    return v;
  };
  const expect = (key: string, wanted: unknown, fallback: unknown, why: string) => {
    const v = c[key] ?? fallback;
    if (v !== wanted) fail(key, `${key} is ${JSON.stringify(v)}; kiln only trains ${key} ${JSON.stringify(wanted)} (${why})`, "kiln cannot represent this model; pick a model without this setting");
  };
  const type = c.model_type;
  if (type === "gpt2") {
    const activation = c.activation_function ?? "gelu_new";
    if (!GPT2_ACTIVATIONS.includes(activation as string)) {
      fail("activation_function", `activation_function is ${JSON.stringify(activation)}; kiln's GPT-2 uses the tanh GELU (${GPT2_ACTIVATIONS.join(" or ")})`, "kiln cannot represent this model");
    }
    expect("scale_attn_weights", true, true, "attention scaled by 1/sqrt(head size)");
    expect("scale_attn_by_inverse_layer_idx", false, false, "no per-layer attention scaling");
    expect("add_cross_attention", false, false, "decoder only");
    const hidden = int("n_embd");
    return checked(
      resolveModelConfig({
        arch: "gpt2",
        vocabSize: int("vocab_size"),
        hiddenSize: hidden,
        numLayers: int("n_layer"),
        numHeads: int("n_head"),
        maxSeqLen: int("n_positions"),
        intermediateSize: c.n_inner === null || c.n_inner === undefined ? 4 * hidden : int("n_inner"),
        normEps: num("layer_norm_epsilon", 1e-5),
        tieEmbeddings: bool(c, "tie_word_embeddings", true, fail),
      }),
      file,
    );
  }
  if (type === "llama" || type === "qwen2") {
    // transformers 5 writes rope_parameters { rope_type, rope_theta, ...scaling } in place of rope_theta and rope_scaling.
    const rope = c.rope_parameters;
    if (rope !== undefined && rope !== null) {
      if (typeof rope !== "object" || Array.isArray(rope)) fail("rope_parameters", `rope_parameters is ${JSON.stringify(rope)}, not an object`, "fix the value in config.json");
      const r = rope as Json;
      if (r.rope_theta !== undefined) c.rope_theta ??= r.rope_theta;
    }
    const ropeScaling = ropeScalingOf(c, rope !== undefined && rope !== null ? "rope_parameters" : "rope_scaling", fail);
    expect("hidden_act", "silu", "silu", "SwiGLU MLP");
    const attentionBias = type === "llama" && bool(c, "attention_bias", false, fail);
    const mlpBias = type === "llama" && bool(c, "mlp_bias", false, fail);
    if (type !== "llama") {
      // Qwen2 computes a sliding window only in the layers past max_window_layers, and only with use_sliding_window.
      expect("use_sliding_window", false, false, "attention over the whole sequence; kiln has no sliding-window attention yet");
    }
    const heads = int("num_attention_heads");
    const hidden = int("hidden_size");
    // Qwen3 and Gemma 3 (and some Llamas) size heads apart from hidden_size / num_attention_heads.
    const head = c.head_dim === undefined || c.head_dim === null ? hidden / heads : int("head_dim");
    return checked(
      resolveModelConfig({
        arch: type,
        vocabSize: int("vocab_size"),
        hiddenSize: hidden,
        numLayers: int("num_hidden_layers"),
        numHeads: heads,
        ...(head !== hidden / heads ? { headDim: head } : {}),
        kvHeads: int("num_key_value_heads", heads),
        maxSeqLen: int("max_position_embeddings"),
        intermediateSize: int("intermediate_size"),
        ropeTheta: num("rope_theta", 10000),
        ...(ropeScaling ? { ropeScaling } : {}),
        ...(attentionBias ? { attentionBias } : {}),
        ...(mlpBias ? { mlpBias } : {}),
        normEps: num("rms_norm_eps", 1e-6),
        tieEmbeddings: bool(c, "tie_word_embeddings", false, fail),
      }),
      file,
    );
  }
  return fail("model_type", `model_type ${JSON.stringify(type)} is not one kiln trains`, `kiln loads model_type "gpt2" (${HF_ARCHITECTURES.gpt2}), "llama" (${HF_ARCHITECTURES.llama}) and "qwen2" (${HF_ARCHITECTURES.qwen2})`);
}

/** RoPE scaling kiln computes (contract RopeScaling), by transformers' rope_type. */
const ROPE_TYPES = ["default", "llama3", "linear"];

/**
 * The RoPE scaling of config.json's `key` (rope_scaling, or transformers 5's rope_parameters):
 * none for rope_type "default" or a null rope_scaling; Llama 3's and linear scaling; any other
 * type (yarn, longrope, dynamic, ...) refused by name.
 */
function ropeScalingOf(c: Json, key: "rope_scaling" | "rope_parameters", fail: (key: string, what: string, hint: string) => never): RopeScaling | undefined {
  const v = c[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) return fail(key, `${key} is ${JSON.stringify(v)}, not an object`, "fix the value in config.json");
  const r = v as Json;
  // transformers 4 wrote "type" in older configs; "rope_type" since.
  const type = r.rope_type ?? r.type ?? "default";
  if (!ROPE_TYPES.includes(type as string)) {
    return fail(`${key}.rope_type`, `RoPE scaling of type ${JSON.stringify(type)} is not one kiln computes`, `kiln computes rope_type ${ROPE_TYPES.map((t) => JSON.stringify(t)).join(", ")}; pick a model with one of these`);
  }
  if (type === "default") return undefined;
  const positive = (name: string): number => {
    const n = r[name];
    return typeof n === "number" && n > 0 ? n : fail(`${key}.${name}`, `${key}.${name} is ${JSON.stringify(n)}, not a positive number`, `RoPE scaling of type ${JSON.stringify(type)} needs it; fix the value in config.json`);
  };
  if (r.attention_factor !== undefined && r.attention_factor !== null && r.attention_factor !== 1) {
    fail(`${key}.attention_factor`, `${key}.attention_factor is ${JSON.stringify(r.attention_factor)}; kiln scales attention by 1 with ${type} RoPE scaling`, "pick a model without attention_factor");
  }
  if (type === "linear") return { type, factor: positive("factor") };
  const scaling: RopeScaling = {
    type: "llama3",
    factor: positive("factor"),
    lowFreqFactor: positive("low_freq_factor"),
    highFreqFactor: positive("high_freq_factor"),
    originalMaxPositions: positive("original_max_position_embeddings"),
  };
  if (!(scaling.highFreqFactor > scaling.lowFreqFactor)) {
    fail(`${key}.high_freq_factor`, `high_freq_factor ${scaling.highFreqFactor} is not above low_freq_factor ${scaling.lowFreqFactor}`, "fix the values in config.json");
  }
  return scaling;
}

/** config.json's rope_scaling for `s`, in transformers' keys. */
function hfRopeScaling(s: RopeScaling | undefined): Json | null {
  if (!s) return null;
  if (s.type === "linear") return { factor: s.factor, rope_type: "linear" };
  return { factor: s.factor, high_freq_factor: s.highFreqFactor, low_freq_factor: s.lowFreqFactor, original_max_position_embeddings: s.originalMaxPositions, rope_type: "llama3" };
}

function bool(c: Json, key: string, fallback: boolean, fail: (key: string, what: string, hint: string) => never): boolean {
  const v = c[key] ?? fallback;
  return typeof v === "boolean" ? v : fail(key, `${key} is ${JSON.stringify(v)}, not true or false`, "fix the value in config.json");
}

/** The shape checks a YAML model section gets (architectures.ts), failing on config.json. */
function checked(m: ModelConfig, file: string): ModelConfig {
  const problem = modelConfigProblem(m);
  if (problem) throw new CheckpointError(problem.message, { where: file, hint: "kiln cannot represent this model" });
  return m;
}

/** Token ids a config names for generation, where the tokenizer has them. */
export interface SpecialTokens {
  bos?: number;
  eos?: number;
}

/** config.json for `m` as transformers writes it for GPT2LMHeadModel or LlamaForCausalLM. */
export function hfConfigOf(m: ModelConfig, torchDtype: string, tokens: SpecialTokens = {}): Json {
  const ids = { bos_token_id: tokens.bos ?? null, eos_token_id: tokens.eos ?? null };
  return HF_CONFIG_WRITERS[m.arch](m, torchDtype, ids);
}

type HfConfigWriter = (m: ModelConfig, torchDtype: string, ids: Json) => Json;

const gpt2HfConfig: HfConfigWriter = (m, torchDtype, ids) => ({
  architectures: [HF_ARCHITECTURES.gpt2],
  model_type: "gpt2",
  activation_function: "gelu_new",
  attn_pdrop: 0.0,
  embd_pdrop: 0.0,
  resid_pdrop: 0.0,
  ...ids,
  initializer_range: 0.02,
  layer_norm_epsilon: m.normEps,
  n_ctx: m.maxSeqLen,
  n_embd: m.hiddenSize,
  n_head: m.numHeads,
  n_inner: m.intermediateSize,
  n_layer: m.numLayers,
  n_positions: m.maxSeqLen,
  reorder_and_upcast_attn: false,
  scale_attn_by_inverse_layer_idx: false,
  scale_attn_weights: true,
  tie_word_embeddings: m.tieEmbeddings,
  torch_dtype: torchDtype,
  use_cache: true,
  vocab_size: m.vocabSize,
});

const llamaHfConfig: HfConfigWriter = (m, torchDtype, ids) => ({
  architectures: [HF_ARCHITECTURES.llama],
  model_type: "llama",
  attention_bias: m.attentionBias ?? false,
  attention_dropout: 0.0,
  ...ids,
  head_dim: headDim(m),
  hidden_act: "silu",
  hidden_size: m.hiddenSize,
  initializer_range: 0.02,
  intermediate_size: m.intermediateSize,
  max_position_embeddings: m.maxSeqLen,
  mlp_bias: m.mlpBias ?? false,
  num_attention_heads: m.numHeads,
  num_hidden_layers: m.numLayers,
  num_key_value_heads: m.kvHeads,
  pretraining_tp: 1,
  rms_norm_eps: m.normEps,
  rope_scaling: hfRopeScaling(m.ropeScaling),
  rope_theta: m.ropeTheta,
  tie_word_embeddings: m.tieEmbeddings,
  torch_dtype: torchDtype,
  use_cache: true,
  vocab_size: m.vocabSize,
});

/** Qwen2Config's keys, as transformers writes them for Qwen2ForCausalLM (full attention in every layer). */
const qwen2HfConfig: HfConfigWriter = (m, torchDtype, ids) => ({
  architectures: [HF_ARCHITECTURES.qwen2],
  model_type: "qwen2",
  attention_dropout: 0.0,
  ...ids,
  hidden_act: "silu",
  hidden_size: m.hiddenSize,
  initializer_range: 0.02,
  intermediate_size: m.intermediateSize,
  max_position_embeddings: m.maxSeqLen,
  head_dim: headDim(m),
  max_window_layers: m.numLayers,
  num_attention_heads: m.numHeads,
  num_hidden_layers: m.numLayers,
  num_key_value_heads: m.kvHeads,
  rms_norm_eps: m.normEps,
  rope_scaling: hfRopeScaling(m.ropeScaling),
  rope_theta: m.ropeTheta,
  sliding_window: null,
  tie_word_embeddings: m.tieEmbeddings,
  torch_dtype: torchDtype,
  use_cache: true,
  use_sliding_window: false,
  vocab_size: m.vocabSize,
});

const HF_CONFIG_WRITERS: Record<Arch, HfConfigWriter> = { gpt2: gpt2HfConfig, llama: llamaHfConfig, qwen2: qwen2HfConfig };

/** generation_config.json: the special tokens and greedy-by-default settings transformers reads. */
export function hfGenerationConfigOf(tokens: SpecialTokens = {}): Json {
  return { _from_model_config: true, bos_token_id: tokens.bos ?? null, eos_token_id: tokens.eos ?? null };
}
