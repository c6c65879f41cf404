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

  it("refuses by key what kiln cannot represent", () => {
    const base = hfConfigOf(llama, "float32");
    const scaled = refusal({ ...base, rope_scaling: { type: "linear", factor: 2 } });
    expect(scaled.where).toBe("m/config.json (rope_scaling)");
    expect(scaled.message).toContain("rope_scaling");
    expect(refusal({ ...base, model_type: "mistral" }).message).toContain('model_type "mistral" is not one kiln trains');
    expect(refusal({ ...base, attention_bias: true }).where).toBe("m/config.json (attention_bias)");
    expect(refusal({ ...hfConfigOf(gpt2, "float32"), activation_function: "relu" }).where).toBe("m/config.json (activation_function)");
    expect(refusal({ ...base, num_key_value_heads: 3 }).message).toContain("not a multiple of the 3 key/value heads");
    const { vocab_size: _, ...noVocab } = base;
    expect(refusal(noVocab).message).toBe("vocab_size is missing");
  });
});
