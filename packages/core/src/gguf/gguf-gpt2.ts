import type { ModelConfig } from "../model/config.js";
import { type GgufModel, type GgufTensorRule, f32, u32 } from "./gguf-tensor-map.js";

/**
 * GPT-2 in llama.cpp's "gpt2" terms: learned positions (position_embd), LayerNorm weights and
 * biases, the fused qkv projection; kiln (like Hugging Face's Conv1D) stores the matrices
 * (in, out), GGUF's rows are outputs. Tied embeddings write no output.weight: llama.cpp
 * reuses token_embd.
 */
export function gpt2Gguf(m: ModelConfig): GgufModel {
  const C = m.hiddenSize, F = m.intermediateSize;
  const conv = (gguf: string, kiln: string, inputs: number, outputs: number): GgufTensorRule => ({ gguf, kiln, shape: [inputs, outputs], transform: { kind: "transpose" }, keepF32: false });
  const vector = (gguf: string, kiln: string, n = C): GgufTensorRule => ({ gguf, kiln, shape: [n], transform: { kind: "copy" }, keepF32: true });
  const norm = (gguf: string, kiln: string) => [vector(`${gguf}.weight`, `${kiln}.weight`), vector(`${gguf}.bias`, `${kiln}.bias`)];
  const tensors: GgufTensorRule[] = [
    { gguf: "token_embd.weight", kiln: "transformer.wte.weight", shape: [m.vocabSize, C], transform: { kind: "copy" }, keepF32: false },
    { gguf: "position_embd.weight", kiln: "transformer.wpe.weight", shape: [m.maxSeqLen, C], transform: { kind: "copy" }, keepF32: false },
  ];
  for (let i = 0; i < m.numLayers; i++) {
    const hf = `transformer.h.${i}`, g = `blk.${i}`;
    tensors.push(
      ...norm(`${g}.attn_norm`, `${hf}.ln_1`),
      conv(`${g}.attn_qkv.weight`, `${hf}.attn.c_attn.weight`, C, 3 * C),
      vector(`${g}.attn_qkv.bias`, `${hf}.attn.c_attn.bias`, 3 * C),
      conv(`${g}.attn_output.weight`, `${hf}.attn.c_proj.weight`, C, C),
      vector(`${g}.attn_output.bias`, `${hf}.attn.c_proj.bias`),
      ...norm(`${g}.ffn_norm`, `${hf}.ln_2`),
      conv(`${g}.ffn_up.weight`, `${hf}.mlp.c_fc.weight`, C, F),
      vector(`${g}.ffn_up.bias`, `${hf}.mlp.c_fc.bias`, F),
      conv(`${g}.ffn_down.weight`, `${hf}.mlp.c_proj.weight`, F, C),
      vector(`${g}.ffn_down.bias`, `${hf}.mlp.c_proj.bias`),
    );
  }
  tensors.push(...norm("output_norm", "transformer.ln_f"));
  if (!m.tieEmbeddings) tensors.push({ gguf: "output.weight", kiln: "lm_head.weight", shape: [m.vocabSize, C], transform: { kind: "copy" }, keepF32: false });
  return {
    arch: "gpt2",
    metadata: [
      ["gpt2.vocab_size", u32(m.vocabSize)],
      ["gpt2.context_length", u32(m.maxSeqLen)],
      ["gpt2.embedding_length", u32(C)],
      ["gpt2.block_count", u32(m.numLayers)],
      ["gpt2.feed_forward_length", u32(F)],
      ["gpt2.attention.head_count", u32(m.numHeads)],
      ["gpt2.attention.layer_norm_epsilon", f32(m.normEps)],
    ],
    tensors,
    derived: [],
    notes: [],
  };
}
