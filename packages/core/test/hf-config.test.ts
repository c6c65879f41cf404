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

  it("refuses by key what kiln cannot represent", () => {
    const base = hfConfigOf(llama, "float32");
    const yarn = refusal({ ...base, rope_scaling: { rope_type: "yarn", factor: 4, original_max_position_embeddings: 8 } });
    expect(yarn.where).toBe("m/config.json (rope_scaling.rope_type)");
    expect(yarn.message).toBe('RoPE scaling of type "yarn" is not one kiln computes');
    expect(refusal({ ...base, rope_scaling: null, rope_parameters: { rope_type: "dynamic", rope_theta: 1e4, factor: 2 } }).where).toBe("m/config.json (rope_parameters.rope_type)");
    expect(refusal({ ...base, rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4 } }).where).toBe("m/config.json (rope_scaling.original_max_position_embeddings)");
    expect(refusal({ ...base, model_type: "mistral" }).message).toContain('model_type "mistral" is not one kiln trains');
    expect(refusal({ ...base, attention_bias: "yes" }).where).toBe("m/config.json (attention_bias)");
    expect(refusal({ ...hfConfigOf(gpt2, "float32"), activation_function: "relu" }).where).toBe("m/config.json (activation_function)");
    expect(refusal({ ...base, num_key_value_heads: 3 }).message).toContain("not a multiple of the 3 key/value heads");
    const { vocab_size: _, ...noVocab } = base;
    expect(refusal(noVocab).message).toBe("vocab_size is missing");
  });
});
