import { bf16ToF32, f16ToF32, f64ToBf16, f64ToF16, type FloatDType } from "@kiln/contract";
import { add, attention, embedding, linear, rmsNorm, rope, scaleBy, swiGlu } from "../ops/index.js";
import { LLAMA_LORA_TARGETS } from "./llama.js";
import type { ArchDef, ConfigProblem } from "./arch-def.js";
import { gqaAttentionParams } from "./attention-params.js";
import { type ModelConfig, attentionWindow, headDim, mambaOf, moeOf, ropeFrequencies } from "./config.js";
import { mlaOf } from "./mla.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

/**
 * Gemma 3 text forward (Gemma3ForCausalLM; rows = B*T, C = hidden, H / KVH heads of D):
 *   x = embed_tokens[ids] * sqrt(C)            (sqrt(C) rounded to the model's dtype)
 *   per layer: h = norm(x); q,k,v = h·Wq^T, h·Wk^T, h·Wv^T; q,k = norm of each head (q_norm, k_norm)
 *              q,k = rope(q), rope(k): sliding layers at ropeLocalTheta unscaled, full layers
 *              at ropeTheta with ropeScaling; a = attn(q, k, v) scaled by queryPreAttnScalar^-1/2,
 *              the sliding window in sliding layers
 *              x += post_attention_norm(o_proj(a))
 *              x += post_feedforward_norm(down_proj(gelu(gate_proj(h2)) * up_proj(h2))), h2 = pre_feedforward_norm(x)
 *   logits = norm(x) · embed_tokens^T (or lm_head^T untied)
 * Every norm is RMSNorm scaling by 1 + weight (weights stored as HF stores them, zeros = 1).
 */
function gemma3Forward(t: Trace, ids: number): { hidden: number; head: number } {
  const { g, config: c, p } = t;
  const D = headDim(c);
  const norm = (x: number, weight: string, name: string, group?: number) => rmsNorm(g, x, p(weight), c.normEps, name, group, 1);
  let x = scaleBy(g, embedding(g, ids, p("model.embed_tokens.weight"), "embed"), embedScale(c.hiddenSize, t.dtype), "embed_scaled");
  for (let i = 0; i < c.numLayers; i++) {
    const n = `model.layers.${i}`;
    x = g.withScope(n, () => {
      const h = norm(x, `${n}.input_layernorm.weight`, `${n}.input_layernorm`);
      const x1 = add(g, x, norm(selfAttention(h, n, i), `${n}.post_attention_layernorm.weight`, `${n}.post_attention_layernorm`), `${n}.resid_attn`);
      const h2 = norm(x1, `${n}.pre_feedforward_layernorm.weight`, `${n}.pre_feedforward_layernorm`);
      const proj = (name: string, x: number) => linear(g, x, p(`${n}.mlp.${name}.weight`), undefined, "out_in", `${n}.mlp.${name}`);
      const m = proj("down_proj", swiGlu(g, proj("gate_proj", h2), proj("up_proj", h2), `${n}.mlp.geglu`, "gelu"));
      return add(g, x1, norm(m, `${n}.post_feedforward_layernorm.weight`, `${n}.post_feedforward_layernorm`), `${n}.resid_mlp`);
    });
  }
  const xf = norm(x, "model.norm.weight", "norm");
  return { hidden: xf, head: c.tieEmbeddings ? p("model.embed_tokens.weight") : p("lm_head.weight") };

  function selfAttention(h: number, n: string, i: number): number {
    const bias = (x: string) => (c.attentionBias ? p(`${n}.self_attn.${x}_proj.bias`) : undefined);
    const proj = (x: "q" | "k" | "v") => linear(g, h, p(`${n}.self_attn.${x}_proj.weight`), bias(x), "out_in", `${n}.${x}`);
    const window = attentionWindow(c, i);
    const freqs = window !== undefined ? { theta: c.ropeLocalTheta ?? 10000 } : ropeFrequencies(c);
    const dims = { batch: t.batch, seqLen: t.seqLen, headDim: D, ...freqs };
    const q = rope(g, norm(proj("q"), `${n}.self_attn.q_norm.weight`, `${n}.q_norm`, D), { ...dims, heads: c.numHeads }, `${n}.q_rope`);
    const k = rope(g, norm(proj("k"), `${n}.self_attn.k_norm.weight`, `${n}.k_norm`, D), { ...dims, heads: c.kvHeads }, `${n}.k_rope`);
    const shape = {
      batch: t.batch,
      seqLen: t.seqLen,
      heads: c.numHeads,
      kvHeads: c.kvHeads,
      headDim: D,
      scale: 1 / Math.sqrt(c.queryPreAttnScalar ?? D),
      ...(window !== undefined ? { window } : {}),
    };
    const a = attention(g, { id: q }, { id: k }, { id: proj("v") }, shape, {}, `${n}.attn`);
    return linear(g, a, p(`${n}.self_attn.o_proj.weight`), bias("o"), "out_in", `${n}.o`);
  }
}

/** sqrt(hidden) as the model's dtype holds it (transformers casts the scale to the weights' dtype). */
export function embedScale(hidden: number, dtype: FloatDType): number {
  const s = Math.sqrt(hidden);
  return dtype === "bf16" ? bf16ToF32(f64ToBf16(s)) : dtype === "f16" ? f16ToF32(f64ToF16(s)) : s;
}

function gemma3Params(c: ModelConfig): ParamSpec[] {
  const C = c.hiddenSize, F = c.intermediateSize;
  const w = (name: string, shape: number[]): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std: 0.02 } });
  // 1 + weight: zeros are the identity scale.
  const norm = (name: string): ParamSpec => ({ name, shape: [C], decay: false, init: { kind: "zeros" } });
  const specs: ParamSpec[] = [{ name: "model.embed_tokens.weight", shape: [c.vocabSize, C], decay: false, init: { kind: "normal", std: 0.02 } }];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push(
      norm(`${p}.input_layernorm.weight`),
      ...gqaAttentionParams(`${p}.self_attn`, c, { qkvBias: c.attentionBias === true, oBias: c.attentionBias === true, qkNorm: "zeros" }),
      norm(`${p}.post_attention_layernorm.weight`),
      norm(`${p}.pre_feedforward_layernorm.weight`),
      w(`${p}.mlp.gate_proj.weight`, [F, C]),
      w(`${p}.mlp.up_proj.weight`, [F, C]),
      w(`${p}.mlp.down_proj.weight`, [C, F]),
      norm(`${p}.post_feedforward_layernorm.weight`),
    );
  }
  specs.push(norm("model.norm.weight"));
  if (!c.tieEmbeddings) specs.push(w("lm_head.weight", [c.vocabSize, C]));
  return specs;
}

function gemma3Problem(c: ModelConfig): ConfigProblem | undefined {
  if (headDim(c) % 2 !== 0) return { field: c.headDim === undefined ? "numHeads" : "headDim", message: `head size ${headDim(c)} is odd; rotary embeddings need an even head size`, hint: "pick an even head_dim" };
  const other: [keyof ModelConfig, boolean, string][] = [
    ["numExperts", moeOf(c) !== undefined, "a mixture of experts (num_experts)"],
    ["kvLatentDim", mlaOf(c) !== undefined, "multi-head latent attention (kv_latent_dim)"],
    ["mambaLayers", mambaOf(c) !== undefined, "Mamba layers (mamba_layers)"],
    ["mlpBias", c.mlpBias === true, "MLP biases (mlp_bias)"],
  ];
  for (const [field, set, what] of other) {
    if (set) return { field, message: `gemma3 has no ${what}`, hint: "remove it, or use arch: llama" };
  }
  return undefined;
}

/**
 * Gemma 3 (Gemma3ForCausalLM, text): scaled embeddings, (1 + weight) RMSNorms before and
 * after attention and the MLP, q/k norms, a GELU-gated MLP, query_pre_attn_scalar, sliding
 * and full layers with their own RoPE bases, tied embeddings by default.
 */
export const gemma3: ArchDef = {
  defaults: (c) => ({ intermediateSize: 4 * c.hiddenSize, normEps: 1e-6, tieEmbeddings: true }),
  check: gemma3Problem,
  params: gemma3Params,
  positionIds: false,
  forward: gemma3Forward,
  linearLayout: "out_in",
  loraTargets: LLAMA_LORA_TARGETS,
  blockPrefix: "model.layers",
  inactiveParams: () => 0,
};
