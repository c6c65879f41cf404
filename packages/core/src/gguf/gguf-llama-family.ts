import { CheckpointError, ropeInvFreq } from "@kiln/contract";
import { type ModelConfig, attentionWindow, headDim, moeOf } from "../model/config.js";
import type { GgufValue } from "./gguf-format.js";
import { type GgufModel, type GgufTensorRule, type GgufTransform, f32, str, u32 } from "./gguf-tensor-map.js";

/**
 * llama.cpp's architecture for each kiln Llama-like architecture. Its "llama" expects q and k
 * rows in its own RoPE layout (Mistral's converter writes "llama" too); qwen2 and qwen3 rotate
 * halves as Hugging Face does (NEOX), so their rows are copied.
 */
const LLAMA_CPP_ARCH = { llama: "llama", mistral: "llama", qwen2: "qwen2", qwen3: "qwen3" } as const;
export type LlamaLikeArch = keyof typeof LLAMA_CPP_ARCH;
export const isLlamaLike = (arch: string): arch is LlamaLikeArch => arch in LLAMA_CPP_ARCH;

/** The shortest attention window of the model's layers, when one is shorter than its context. */
function shortestWindow(m: ModelConfig): number | undefined {
  const windows = Array.from({ length: m.numLayers }, (_, i) => attentionWindow(m, i) ?? m.maxSeqLen);
  const w = Math.min(...windows);
  return w < m.maxSeqLen ? w : undefined;
}

/**
 * A Llama, Mistral, Qwen2 or Qwen3 in GGUF terms (Llama and Mistral also with experts, as
 * Mixtral's): llama.cpp's hyperparameter keys and tensor names, Llama 3's RoPE scaling as the rope_freqs factors (each base frequency over its
 * scaled one). llama.cpp computes full attention for these architectures, so a model with a
 * sliding window gets the window as its context length, where the two agree.
 */
export function llamaLikeGguf(m: ModelConfig & { arch: LlamaLikeArch }, where: string): GgufModel {
  const a = LLAMA_CPP_ARCH[m.arch];
  const C = m.hiddenSize, D = headDim(m), F = m.intermediateSize, H = m.numHeads, KV = m.kvHeads;
  const refuse = (what: string): never => {
    throw new CheckpointError(`llama.cpp's ${a} architecture has no ${what}, which this ${m.arch} checkpoint has`, {
      where,
      hint: "export a Hugging Face folder instead (kiln export --format hf)",
    });
  };
  if (m.attentionBias) refuse("output-projection bias (attention_bias)");
  if (m.mlpBias) refuse("MLP biases (mlp_bias)");
  if (m.ropeScaling?.type === "llama3" && a !== "llama") refuse("Llama 3 RoPE scaling");
  // kiln's experts route as Mixtral's do (softmax, top k, renormalised over the k): llama.cpp's llama runs them.
  const moe = moeOf(m);
  if (moe && a !== "llama") refuse("mixture-of-experts MLP (its qwen2moe/qwen3moe route and gate differently)");
  if (moe?.shared) refuse("ungated shared expert");

  const window = shortestWindow(m);
  const metadata: [string, GgufValue][] = [
    [`${a}.vocab_size`, u32(m.vocabSize)],
    [`${a}.context_length`, u32(window ?? m.maxSeqLen)],
    [`${a}.embedding_length`, u32(C)],
    [`${a}.block_count`, u32(m.numLayers)],
    [`${a}.feed_forward_length`, u32(F)],
    [`${a}.rope.dimension_count`, u32(D)],
    [`${a}.attention.head_count`, u32(H)],
    [`${a}.attention.head_count_kv`, u32(KV)],
    [`${a}.attention.key_length`, u32(D)],
    [`${a}.attention.value_length`, u32(D)],
    [`${a}.attention.layer_norm_rms_epsilon`, f32(m.normEps)],
    [`${a}.rope.freq_base`, f32(m.ropeTheta)],
  ];
  if (m.ropeScaling?.type === "linear") metadata.push([`${a}.rope.scaling.type`, str("linear")], [`${a}.rope.scaling.factor`, f32(m.ropeScaling.factor)]);
  if (moe) metadata.push([`${a}.expert_count`, u32(moe.numExperts)], [`${a}.expert_used_count`, u32(moe.topK)]);

  const rope = (heads: number): GgufTransform => (a === "llama" ? { kind: "ropeRows", heads } : { kind: "copy" });
  const matrix = (gguf: string, kiln: string, rows: number, cols: number, transform: GgufTransform = { kind: "copy" }): GgufTensorRule => ({ gguf, kiln, shape: [rows, cols], transform, keepF32: false });
  const vector = (gguf: string, kiln: string, n = C, transform: GgufTransform = { kind: "copy" }): GgufTensorRule => ({ gguf, kiln, shape: [n], transform, keepF32: true });
  const tensors: GgufTensorRule[] = [matrix("token_embd.weight", "model.embed_tokens.weight", m.vocabSize, C)];
  for (let i = 0; i < m.numLayers; i++) {
    const hf = `model.layers.${i}`, g = `blk.${i}`, att = `${hf}.self_attn`;
    tensors.push(
      vector(`${g}.attn_norm.weight`, `${hf}.input_layernorm.weight`),
      matrix(`${g}.attn_q.weight`, `${att}.q_proj.weight`, H * D, C, rope(H)),
      matrix(`${g}.attn_k.weight`, `${att}.k_proj.weight`, KV * D, C, rope(KV)),
      matrix(`${g}.attn_v.weight`, `${att}.v_proj.weight`, KV * D, C),
    );
    if (m.arch === "qwen2") {
      tensors.push(vector(`${g}.attn_q.bias`, `${att}.q_proj.bias`, H * D), vector(`${g}.attn_k.bias`, `${att}.k_proj.bias`, KV * D), vector(`${g}.attn_v.bias`, `${att}.v_proj.bias`, KV * D));
    }
    if (m.arch === "qwen3") tensors.push(vector(`${g}.attn_q_norm.weight`, `${att}.q_norm.weight`, D), vector(`${g}.attn_k_norm.weight`, `${att}.k_norm.weight`, D));
    tensors.push(
      matrix(`${g}.attn_output.weight`, `${att}.o_proj.weight`, C, H * D),
      vector(`${g}.ffn_norm.weight`, `${hf}.post_attention_layernorm.weight`),
    );
    if (moe) {
      const E = moe.numExperts, experts = (gguf: string, kiln: string, shape: number[]): GgufTensorRule => ({ gguf, kiln, shape, transform: { kind: "copy" }, keepF32: false });
      tensors.push(
        matrix(`${g}.ffn_gate_inp.weight`, `${hf}.mlp.gate.weight`, E, C),
        experts(`${g}.ffn_gate_exps.weight`, `${hf}.mlp.experts.gate_proj.weight`, [E, F, C]),
        experts(`${g}.ffn_up_exps.weight`, `${hf}.mlp.experts.up_proj.weight`, [E, F, C]),
        experts(`${g}.ffn_down_exps.weight`, `${hf}.mlp.experts.down_proj.weight`, [E, C, F]),
      );
    } else {
      tensors.push(
        matrix(`${g}.ffn_gate.weight`, `${hf}.mlp.gate_proj.weight`, F, C),
        matrix(`${g}.ffn_up.weight`, `${hf}.mlp.up_proj.weight`, F, C),
        matrix(`${g}.ffn_down.weight`, `${hf}.mlp.down_proj.weight`, C, F),
      );
    }
  }
  tensors.push(vector("output_norm.weight", "model.norm.weight"));
  if (!m.tieEmbeddings) tensors.push(matrix("output.weight", "lm_head.weight", m.vocabSize, C));

  const derived: GgufModel["derived"] = [];
  if (m.ropeScaling?.type === "llama3") {
    const base = ropeInvFreq({ headDim: D, theta: m.ropeTheta });
    const scaled = ropeInvFreq({ headDim: D, theta: m.ropeTheta, scaling: m.ropeScaling });
    derived.push({ name: "rope_freqs.weight", ne: [D / 2], keepF32: true, values: () => Float32Array.from(base, (f, i) => f / scaled[i]) });
  }
  const notes = window === undefined ? [] : [`llama.cpp's ${a} computes full attention, so the file's context length is the sliding window (${window} tokens), where the two agree`];
  return { arch: a, metadata, tensors, derived, notes };
}
