import { describe, expect, it } from "vitest";
import { CheckpointError } from "@kiln/contract";
import { hfConfigOf, modelConfigFromHf } from "../src/hf/hf-config.js";
import { resolveModelConfig } from "../src/model/architectures.js";

const gpt2 = resolveModelConfig({ arch: "gpt2", vocabSize: 64, hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16 });
const llama = resolveModelConfig({ arch: "llama", vocabSize: 64, hiddenSize: 32, numLayers: 2, numHeads: 4, kvHeads: 2, maxSeqLen: 16, intermediateSize: 48, ropeTheta: 500000, normEps: 1e-5, tieEmbeddings: true });

function refusal(json: Record<string, unknown>): CheckpointError {
  try {
    modelConfigFromHf(json, "m/config.json");
  } catch (err) {
    expect(err).toBeInstanceOf(CheckpointError);
    return err as CheckpointError;
  }
  throw new Error("the config was accepted");
}

describe("Hugging Face config.json", () => {
  it("a written config reads back as the same model, GPT-2 and Llama", () => {
    for (const m of [gpt2, llama]) expect(modelConfigFromHf(hfConfigOf(m, "float32"), "config.json")).toEqual(m);
  });

  it("reads GPT-2's own config.json (n_inner null, tied, prefix-free names aside)", () => {
    const m = modelConfigFromHf(
      { model_type: "gpt2", vocab_size: 50257, n_embd: 768, n_layer: 12, n_head: 12, n_positions: 1024, n_ctx: 1024, n_inner: null, activation_function: "gelu_new", layer_norm_epsilon: 1e-5 },
      "config.json",
    );
    expect(m).toMatchObject({ arch: "gpt2", hiddenSize: 768, intermediateSize: 3072, tieEmbeddings: true, kvHeads: 12, maxSeqLen: 1024 });
  });

  it("reads Llama's GQA, rope_theta, rms_norm_eps and untied head by default", () => {
    const m = modelConfigFromHf(
      { model_type: "llama", vocab_size: 100, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 1, num_attention_heads: 8, num_key_value_heads: 2, max_position_embeddings: 32, rope_theta: 5e5, rms_norm_eps: 1e-5, rope_scaling: null },
      "config.json",
    );
    expect(m).toMatchObject({ arch: "llama", kvHeads: 2, ropeTheta: 5e5, normEps: 1e-5, tieEmbeddings: false });
  });

  it("reads Llama 3.2's rope_scaling (llama3), transformers 5's rope_parameters and linear scaling, and writes them back", () => {
    // Llama-3.2-1B's config.json, as published.
    const llama32 = {
      architectures: ["LlamaForCausalLM"], model_type: "llama", vocab_size: 128256, hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16,
      num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000.0,
      rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: "llama3" },
      tie_word_embeddings: true, attention_bias: false, mlp_bias: false, hidden_act: "silu",
    };
    const m = modelConfigFromHf(llama32, "config.json");
    expect(m).toMatchObject({ ropeTheta: 500000, tieEmbeddings: true, ropeScaling: { type: "llama3", factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } });
    expect(hfConfigOf(m, "bfloat16").rope_scaling).toEqual(llama32.rope_scaling);
    expect(modelConfigFromHf(hfConfigOf(m, "float32"), "config.json")).toEqual(m);
    const { rope_scaling: _, rope_theta: __, ...v5 } = llama32;
    expect(modelConfigFromHf({ ...v5, rope_parameters: { ...llama32.rope_scaling, rope_theta: 500000.0 } }, "config.json")).toEqual(m);
    const linear = modelConfigFromHf({ ...llama32, rope_scaling: { type: "linear", factor: 2 } }, "config.json");
    expect(linear.ropeScaling).toEqual({ type: "linear", factor: 2 });
    expect(modelConfigFromHf({ ...llama32, rope_scaling: { rope_type: "default" } }, "config.json").ropeScaling).toBeUndefined();
  });

  it("reads Llama's attention_bias and mlp_bias and writes them back", () => {
    const m = modelConfigFromHf({ ...hfConfigOf(llama, "float32"), attention_bias: true, mlp_bias: true }, "config.json");
    expect(m).toMatchObject({ attentionBias: true, mlpBias: true });
    expect(hfConfigOf(m, "float32")).toMatchObject({ attention_bias: true, mlp_bias: true });
    expect(modelConfigFromHf(hfConfigOf(m, "float32"), "config.json")).toEqual(m);
  });

  it("reads a head_dim apart from hidden_size / num_attention_heads and writes it back", () => {
    const base = hfConfigOf(llama, "float32");
    const m = modelConfigFromHf({ ...base, head_dim: 12 }, "config.json");
    expect(m.headDim).toBe(12);
    expect(hfConfigOf(m, "float32").head_dim).toBe(12);
    expect(modelConfigFromHf(hfConfigOf(m, "float32"), "config.json")).toEqual(m);
    expect(modelConfigFromHf({ ...base, head_dim: 8 }, "config.json").headDim).toBeUndefined();
    expect(refusal({ ...base, head_dim: 7 }).message).toBe("head_dim 7 is odd; rotary embeddings need an even head size");
  });

  it("writes RoPE under transformers 5's rope_parameters and 4's rope_theta / rope_scaling, and dtype under both names", () => {
    const json = hfConfigOf({ ...llama, ropeScaling: { type: "linear", factor: 2 } }, "bfloat16");
    expect(json).toMatchObject({ rope_parameters: { rope_type: "linear", factor: 2, rope_theta: 500000 }, rope_scaling: { rope_type: "linear", factor: 2 }, rope_theta: 500000, dtype: "bfloat16", torch_dtype: "bfloat16" });
    expect(hfConfigOf(llama, "float32")).toMatchObject({ rope_parameters: { rope_type: "default", rope_theta: 500000 }, rope_scaling: null });
  });

  it("reads Qwen3 (head_dim, attention_bias, q/k norms by class) and writes Qwen3ForCausalLM", () => {
    // Qwen3-0.6B's config.json, as published (the keys kiln reads).
    const qwen3 = {
      architectures: ["Qwen3ForCausalLM"], model_type: "qwen3", vocab_size: 151936, hidden_size: 1024, intermediate_size: 3072, num_hidden_layers: 28,
      num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128, max_position_embeddings: 40960, max_window_layers: 28, rms_norm_eps: 1e-6,
      rope_scaling: null, rope_theta: 1000000, sliding_window: null, use_sliding_window: false, tie_word_embeddings: true, attention_bias: false, hidden_act: "silu",
    };
    const m = modelConfigFromHf(qwen3, "config.json");
    expect(m).toMatchObject({ arch: "qwen3", headDim: 128, kvHeads: 8, ropeTheta: 1e6, tieEmbeddings: true });
    expect(m.slidingWindow).toBeUndefined();
    const written = hfConfigOf(m, "bfloat16");
    expect(written).toMatchObject({ architectures: ["Qwen3ForCausalLM"], model_type: "qwen3", head_dim: 128, use_sliding_window: false, sliding_window: null, attention_bias: false });
    expect(Object.keys(qwen3).filter((k) => !(k in written))).toEqual([]);
    expect(modelConfigFromHf(written, "config.json")).toEqual(m);
    expect(modelConfigFromHf({ ...qwen3, attention_bias: true }, "config.json").attentionBias).toBe(true);
  });

  it("reads Qwen2's sliding window only with use_sliding_window: from layer_types, else from max_window_layers on", () => {
    const base = { ...hfConfigOf({ ...llama, arch: "qwen2", tieEmbeddings: false }, "float32") };
    delete base.layer_types;
    expect(modelConfigFromHf({ ...base, use_sliding_window: false, sliding_window: 4 }, "config.json").slidingWindow).toBeUndefined();
    const derived = modelConfigFromHf({ ...base, use_sliding_window: true, sliding_window: 4, max_window_layers: 1 }, "config.json");
    expect(derived).toMatchObject({ slidingWindow: 4, layerTypes: ["full_attention", "sliding_attention"] });
    const listed = modelConfigFromHf({ ...base, use_sliding_window: true, sliding_window: 4, layer_types: ["sliding_attention", "full_attention"] }, "config.json");
    expect(listed.layerTypes).toEqual(["sliding_attention", "full_attention"]);
    expect(hfConfigOf(listed, "float32")).toMatchObject({ use_sliding_window: true, sliding_window: 4, layer_types: ["sliding_attention", "full_attention"], max_window_layers: 0 });
    expect(modelConfigFromHf(hfConfigOf(listed, "float32"), "config.json")).toEqual(listed);
    const bad = refusal({ ...base, use_sliding_window: true, sliding_window: 4, layer_types: ["sliding_attention"] });
    expect(bad.where).toBe("m/config.json (layer_types)");
    expect(refusal({ ...base, use_sliding_window: true }).where).toBe("m/config.json (sliding_window)");
  });

  it("reads Mistral's sliding_window (null: full attention) and writes MistralForCausalLM", () => {
    const mistral = {
      architectures: ["MistralForCausalLM"], model_type: "mistral", vocab_size: 32000, hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32,
      num_attention_heads: 32, num_key_value_heads: 8, head_dim: null, max_position_embeddings: 32768, rms_norm_eps: 1e-5, rope_theta: 10000.0,
      sliding_window: 4096, tie_word_embeddings: false, hidden_act: "silu",
    };
    const m = modelConfigFromHf(mistral, "config.json");
    expect(m).toMatchObject({ arch: "mistral", slidingWindow: 4096, kvHeads: 8 });
    expect(m.headDim).toBeUndefined();
    expect(hfConfigOf(m, "bfloat16")).toMatchObject({ architectures: ["MistralForCausalLM"], model_type: "mistral", sliding_window: 4096, head_dim: 128 });
    expect(modelConfigFromHf(hfConfigOf(m, "bfloat16"), "config.json")).toEqual(m);
    expect(modelConfigFromHf({ ...mistral, sliding_window: null }, "config.json").slidingWindow).toBeUndefined();
  });

  it("reads Gemma 3 1B's config.json (sliding_window_pattern, rope_local_base_freq) and writes Gemma3ForCausalLM", () => {
    // gemma-3-1b-pt's config.json, as published (the keys kiln reads).
    const gemma = {
      architectures: ["Gemma3ForCausalLM"], model_type: "gemma3_text", vocab_size: 262144, hidden_size: 1152, intermediate_size: 6912, num_hidden_layers: 26,
      num_attention_heads: 4, num_key_value_heads: 1, head_dim: 256, max_position_embeddings: 32768, rms_norm_eps: 1e-6, query_pre_attn_scalar: 256,
      rope_theta: 1000000, rope_local_base_freq: 10000, rope_scaling: null, sliding_window: 512, sliding_window_pattern: 6, hidden_activation: "gelu_pytorch_tanh",
      final_logit_softcapping: null, attn_logit_softcapping: null, attention_bias: false,
    };
    const m = modelConfigFromHf(gemma, "config.json");
    expect(m).toMatchObject({ arch: "gemma3", headDim: 256, kvHeads: 1, ropeTheta: 1e6, ropeLocalTheta: 1e4, slidingWindow: 512, queryPreAttnScalar: 256, tieEmbeddings: true });
    expect(m.layerTypes?.map((t) => t[0]).join("")).toBe("sssssfsssssfsssssfsssssfss");
    const written = hfConfigOf(m, "bfloat16");
    expect(written).toMatchObject({ sliding_window_pattern: 6, rope_local_base_freq: 10000, rope_parameters: { full_attention: { rope_type: "default", rope_theta: 1e6 }, sliding_attention: { rope_type: "default", rope_theta: 1e4 } } });
    expect(Object.keys(gemma).filter((k) => !(k in written))).toEqual([]);
    expect(modelConfigFromHf(written, "config.json")).toEqual(m);
    const { rope_theta: _, rope_local_base_freq: __, rope_scaling: ___, ...v5 } = written;
    expect(modelConfigFromHf(v5, "config.json")).toEqual(m);
    const scaled = modelConfigFromHf({ ...gemma, rope_scaling: { rope_type: "linear", factor: 8 } }, "config.json");
    expect(scaled.ropeScaling).toEqual({ type: "linear", factor: 8 });
    expect(refusal({ ...gemma, final_logit_softcapping: 30 }).where).toBe("m/config.json (final_logit_softcapping)");
    expect(refusal({ ...gemma, hidden_activation: "gelu" }).where).toBe("m/config.json (hidden_activation)");
    expect(refusal({ ...gemma, layer_types: ["full_attention"] }).where).toBe("m/config.json (layer_types)");
  });

  it("refuses by key what kiln cannot represent", () => {
    const { rope_parameters: _v5, ...base } = hfConfigOf(llama, "float32");
    const yarn = refusal({ ...base, rope_scaling: { rope_type: "yarn", factor: 4, original_max_position_embeddings: 8 } });
    expect(yarn.where).toBe("m/config.json (rope_scaling.rope_type)");
    expect(yarn.message).toBe('RoPE scaling of type "yarn" is not one kiln computes');
    expect(refusal({ ...base, rope_scaling: null, rope_parameters: { rope_type: "dynamic", rope_theta: 1e4, factor: 2 } }).where).toBe("m/config.json (rope_parameters.rope_type)");
    expect(refusal({ ...base, rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4 } }).where).toBe("m/config.json (rope_scaling.original_max_position_embeddings)");
    expect(refusal({ ...base, model_type: "falcon" }).message).toContain('model_type "falcon" is not one kiln trains');
    const disagree = refusal({ ...hfConfigOf(llama, "float32"), rope_theta: 10 });
    expect(disagree.where).toBe("m/config.json (rope_parameters)");
    expect(disagree.message).toContain("rope_theta / rope_scaling say");
    expect(refusal({ ...base, attention_bias: "yes" }).where).toBe("m/config.json (attention_bias)");
    expect(refusal({ ...hfConfigOf(gpt2, "float32"), activation_function: "relu" }).where).toBe("m/config.json (activation_function)");
    expect(refusal({ ...base, num_key_value_heads: 3 }).message).toContain("not a multiple of the 3 key/value heads");
    const { vocab_size: _, ...noVocab } = base;
    expect(refusal(noVocab).message).toBe("vocab_size is missing");
  });
});
