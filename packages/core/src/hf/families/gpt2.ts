import type { HfFamily } from "./hf-family.js";

/** GPT-2's GELU is the tanh approximation; transformers names it either way. */
const GPT2_ACTIVATIONS = ["gelu_new", "gelu_pytorch_tanh"];

/** GPT2LMHeadModel: learned positions, LayerNorm, a GELU MLP, one packed qkv projection. */
export const gpt2Hf: HfFamily = {
  architecture: "GPT2LMHeadModel",
  modelType: "gpt2",
  read(r) {
    const activation = r.json.activation_function ?? "gelu_new";
    if (!GPT2_ACTIVATIONS.includes(activation as string)) {
      r.fail("activation_function", `activation_function is ${JSON.stringify(activation)}; kiln's GPT-2 uses the tanh GELU (${GPT2_ACTIVATIONS.join(" or ")})`, "kiln cannot represent this model");
    }
    r.expect("scale_attn_weights", true, true, "attention scaled by 1/sqrt(head size)");
    r.expect("scale_attn_by_inverse_layer_idx", false, false, "no per-layer attention scaling");
    r.expect("add_cross_attention", false, false, "decoder only");
    const hidden = r.int("n_embd");
    return {
      arch: "gpt2",
      vocabSize: r.int("vocab_size"),
      hiddenSize: hidden,
      numLayers: r.int("n_layer"),
      numHeads: r.int("n_head"),
      maxSeqLen: r.int("n_positions"),
      intermediateSize: r.has("n_inner") ? r.int("n_inner") : 4 * hidden,
      normEps: r.num("layer_norm_epsilon", 1e-5),
      tieEmbeddings: r.bool("tie_word_embeddings", true),
    };
  },
  write: (m, common) => ({
    architectures: ["GPT2LMHeadModel"],
    model_type: "gpt2",
    activation_function: "gelu_new",
    attn_pdrop: 0.0,
    embd_pdrop: 0.0,
    resid_pdrop: 0.0,
    ...common,
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
    use_cache: true,
    vocab_size: m.vocabSize,
  }),
};
