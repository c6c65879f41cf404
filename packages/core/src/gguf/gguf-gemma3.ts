import { CheckpointError } from "@kiln/contract";
import { type ModelConfig, attentionWindow, headDim } from "../model/config.js";
import type { GgufValue } from "./gguf-format.js";
import { type GgufModel, type GgufTensorRule, type GgufTransform, f32, str, u32 } from "./gguf-tensor-map.js";

/** llama.cpp scales Gemma 3's queries by 1/sqrt(head_dim), and by 1/sqrt(hidden / heads) for its 62-layer (27B) shape. */
const queryScalarOf = (m: ModelConfig) => (m.numLayers === 62 ? m.hiddenSize / m.numHeads : headDim(m));

/**
 * Gemma 3 (text) in llama.cpp's "gemma3" terms: its norms scale by w (Gemma's by 1 + w, so the
 * file holds 1 + w, as llama.cpp's converter writes), q/k norms, norms after attention and
 * the MLP, the sliding layers as a per-layer pattern with their own RoPE base; halves
 * rotated as Hugging Face does (rows copied).
 */
export function gemma3Gguf(m: ModelConfig, where: string): GgufModel {
  const C = m.hiddenSize, D = headDim(m), F = m.intermediateSize, H = m.numHeads, KV = m.kvHeads;
  const refuse = (what: string, hint = "export a Hugging Face folder instead (kiln export --format hf)"): never => {
    throw new CheckpointError(`llama.cpp's gemma3 ${what}`, { where, hint });
  };
  if (m.attentionBias) refuse("has no attention biases, which this checkpoint has");
  if ((m.queryPreAttnScalar ?? D) !== queryScalarOf(m)) refuse(`scales queries by 1/sqrt(${queryScalarOf(m)}); this checkpoint's query_pre_attn_scalar is ${m.queryPreAttnScalar}`);
  if (m.ropeScaling && m.ropeScaling.type !== "linear") refuse(`has linear RoPE scaling only; this checkpoint's is ${m.ropeScaling.type}`);

  const sliding = Array.from({ length: m.numLayers }, (_, i) => attentionWindow(m, i) !== undefined);
  const metadata: [string, GgufValue][] = [
    ["gemma3.vocab_size", u32(m.vocabSize)],
    ["gemma3.context_length", u32(m.maxSeqLen)],
    ["gemma3.embedding_length", u32(C)],
    ["gemma3.block_count", u32(m.numLayers)],
    ["gemma3.feed_forward_length", u32(F)],
    ["gemma3.attention.head_count", u32(H)],
    ["gemma3.attention.head_count_kv", u32(KV)],
    ["gemma3.attention.key_length", u32(D)],
    ["gemma3.attention.value_length", u32(D)],
    ["gemma3.attention.layer_norm_rms_epsilon", f32(m.normEps)],
    ["gemma3.rope.dimension_count", u32(D)],
    ["gemma3.rope.freq_base", f32(m.ropeTheta)],
  ];
  if (m.ropeScaling?.type === "linear") metadata.push(["gemma3.rope.scaling.type", str("linear")], ["gemma3.rope.scaling.factor", f32(m.ropeScaling.factor)]);
  if (m.slidingWindow !== undefined && sliding.some(Boolean)) {
    metadata.push(
      ["gemma3.attention.sliding_window", u32(m.slidingWindow)],
      ["gemma3.attention.sliding_window_pattern", { type: "array", itemType: "bool", values: sliding }],
      ["gemma3.rope.freq_base_swa", f32(m.ropeLocalTheta ?? m.ropeTheta)],
    );
  }

  const plusOne: GgufTransform = { kind: "plusOne" };
  const matrix = (gguf: string, kiln: string, rows: number, cols: number): GgufTensorRule => ({ gguf, kiln, shape: [rows, cols], transform: { kind: "copy" }, keepF32: false });
  const norm = (gguf: string, kiln: string, n = C): GgufTensorRule => ({ gguf, kiln, shape: [n], transform: plusOne, keepF32: true });
  const tensors: GgufTensorRule[] = [matrix("token_embd.weight", "model.embed_tokens.weight", m.vocabSize, C)];
  for (let i = 0; i < m.numLayers; i++) {
    const hf = `model.layers.${i}`, g = `blk.${i}`, att = `${hf}.self_attn`;
    tensors.push(
      norm(`${g}.attn_norm.weight`, `${hf}.input_layernorm.weight`),
      matrix(`${g}.attn_q.weight`, `${att}.q_proj.weight`, H * D, C),
      matrix(`${g}.attn_k.weight`, `${att}.k_proj.weight`, KV * D, C),
      matrix(`${g}.attn_v.weight`, `${att}.v_proj.weight`, KV * D, C),
      norm(`${g}.attn_q_norm.weight`, `${att}.q_norm.weight`, D),
      norm(`${g}.attn_k_norm.weight`, `${att}.k_norm.weight`, D),
      matrix(`${g}.attn_output.weight`, `${att}.o_proj.weight`, C, H * D),
      norm(`${g}.post_attention_norm.weight`, `${hf}.post_attention_layernorm.weight`),
      norm(`${g}.ffn_norm.weight`, `${hf}.pre_feedforward_layernorm.weight`),
      matrix(`${g}.ffn_gate.weight`, `${hf}.mlp.gate_proj.weight`, F, C),
      matrix(`${g}.ffn_up.weight`, `${hf}.mlp.up_proj.weight`, F, C),
      matrix(`${g}.ffn_down.weight`, `${hf}.mlp.down_proj.weight`, C, F),
      norm(`${g}.post_ffw_norm.weight`, `${hf}.post_feedforward_layernorm.weight`),
    );
  }
  tensors.push(norm("output_norm.weight", "model.norm.weight"));
  if (!m.tieEmbeddings) tensors.push(matrix("output.weight", "lm_head.weight", m.vocabSize, C));
  return { arch: "gemma3", metadata, tensors, derived: [], notes: [] };
}
