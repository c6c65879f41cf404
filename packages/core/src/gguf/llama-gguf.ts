import { CheckpointError, ropeInvFreq } from "@kiln/contract";
import { type ModelConfig, headDim } from "../model/config.js";
import type { GgufValue } from "./gguf-format.js";

/** A tensor of the model in GGUF terms: llama.cpp's name, ggml ne (row length first), f32 values. */
export interface GgufModelTensor {
  name: string;
  ne: number[];
  values: Float32Array;
  /** 1-D tensors (norms, factors) stay f32 whatever the file's type, as llama.cpp's converter keeps them. */
  keepF32: boolean;
}

const u32 = (value: number): GgufValue => ({ type: "u32", value });
const f32 = (value: number): GgufValue => ({ type: "f32", value });

/**
 * Rows of a q or k projection (heads x D, C) from Hugging Face's RoPE layout (rotate_half:
 * the pairs are (i, i + D/2)) to llama.cpp's Llama layout (the pairs adjacent: (2i, 2i + 1)):
 * within each head, row i of the first half goes to 2i, row i of the second half to 2i + 1.
 */
export function interleaveRopeRows(w: Float32Array, heads: number, cols: number): Float32Array {
  const rows = w.length / cols, D = rows / heads, half = D / 2;
  const out = new Float32Array(w.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (const [from, to] of [[i, 2 * i], [half + i, 2 * i + 1]]) {
        out.set(w.subarray((h * D + from) * cols, (h * D + from + 1) * cols), (h * D + to) * cols);
      }
    }
  }
  return out;
}

/**
 * llama.cpp's "llama" architecture for a kiln Llama: its hyperparameter keys and its
 * tensors (token_embd, blk.N.attn_q, ..., output), q and k rows interleaved for its RoPE,
 * Llama 3's scaling as the rope_freqs factors (each base frequency over its scaled one).
 */
export function llamaGguf(m: ModelConfig, weights: ReadonlyMap<string, Float32Array>, where: string): { metadata: [string, GgufValue][]; tensors: GgufModelTensor[] } {
  if (m.arch !== "llama" || m.numExperts || m.kvLatentDim || m.mambaLayers?.length || m.attentionBias || m.mlpBias) {
    throw new CheckpointError(`kiln writes GGUF for dense Llama models so far; this checkpoint is ${m.arch}${m.numExperts ? " with a mixture of experts" : m.kvLatentDim ? " with latent attention" : m.mambaLayers?.length ? " with Mamba layers" : m.attentionBias || m.mlpBias ? " with biases" : ""}`, {
      where,
      hint: "export a Hugging Face folder instead (kiln export without --format gguf); GGUF for the other architectures is planned",
    });
  }
  const C = m.hiddenSize, D = headDim(m), F = m.intermediateSize;
  const metadata: [string, GgufValue][] = [
    ["llama.vocab_size", u32(m.vocabSize)],
    ["llama.context_length", u32(m.maxSeqLen)],
    ["llama.embedding_length", u32(C)],
    ["llama.block_count", u32(m.numLayers)],
    ["llama.feed_forward_length", u32(F)],
    ["llama.rope.dimension_count", u32(D)],
    ["llama.attention.head_count", u32(m.numHeads)],
    ["llama.attention.head_count_kv", u32(m.kvHeads)],
    ["llama.attention.key_length", u32(D)],
    ["llama.attention.value_length", u32(D)],
    ["llama.attention.layer_norm_rms_epsilon", f32(m.normEps)],
    ["llama.rope.freq_base", f32(m.ropeTheta)],
  ];
  if (m.ropeScaling?.type === "linear") metadata.push(["llama.rope.scaling.type", { type: "string", value: "linear" }], ["llama.rope.scaling.factor", f32(m.ropeScaling.factor)]);
  const get = (name: string) => {
    const w = weights.get(name);
    if (!w) throw new CheckpointError(`the checkpoint has no tensor ${name}`, { where, hint: "the checkpoint is damaged; export another one" });
    return w;
  };
  const matrix = (name: string, hf: string, rows: number, cols: number, values = get(hf)): GgufModelTensor => ({ name, ne: [cols, rows], values, keepF32: false });
  const vector = (name: string, hf: string): GgufModelTensor => ({ name, ne: [C], values: get(hf), keepF32: true });
  const tensors: GgufModelTensor[] = [matrix("token_embd.weight", "model.embed_tokens.weight", m.vocabSize, C)];
  if (m.ropeScaling?.type === "llama3") {
    const base = ropeInvFreq({ headDim: D, theta: m.ropeTheta });
    const scaled = ropeInvFreq({ headDim: D, theta: m.ropeTheta, scaling: m.ropeScaling });
    tensors.push({ name: "rope_freqs.weight", ne: [D / 2], values: Float32Array.from(base, (f, i) => f / scaled[i]), keepF32: true });
  }
  for (let i = 0; i < m.numLayers; i++) {
    const hf = `model.layers.${i}`, g = `blk.${i}`;
    tensors.push(
      vector(`${g}.attn_norm.weight`, `${hf}.input_layernorm.weight`),
      matrix(`${g}.attn_q.weight`, "", m.numHeads * D, C, interleaveRopeRows(get(`${hf}.self_attn.q_proj.weight`), m.numHeads, C)),
      matrix(`${g}.attn_k.weight`, "", m.kvHeads * D, C, interleaveRopeRows(get(`${hf}.self_attn.k_proj.weight`), m.kvHeads, C)),
      matrix(`${g}.attn_v.weight`, `${hf}.self_attn.v_proj.weight`, m.kvHeads * D, C),
      matrix(`${g}.attn_output.weight`, `${hf}.self_attn.o_proj.weight`, C, m.numHeads * D),
      vector(`${g}.ffn_norm.weight`, `${hf}.post_attention_layernorm.weight`),
      matrix(`${g}.ffn_gate.weight`, `${hf}.mlp.gate_proj.weight`, F, C),
      matrix(`${g}.ffn_up.weight`, `${hf}.mlp.up_proj.weight`, F, C),
      matrix(`${g}.ffn_down.weight`, `${hf}.mlp.down_proj.weight`, C, F),
    );
  }
  tensors.push(vector("output_norm.weight", "model.norm.weight"));
  if (!m.tieEmbeddings) tensors.push(matrix("output.weight", "lm_head.weight", m.vocabSize, C));
  return { metadata, tensors };
}
