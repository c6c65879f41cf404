import { add, attention, embedding, linear, rmsNorm, rope } from "../ops/index.js";
import type { ArchDef, ConfigProblem } from "./arch-def.js";
import { gqaAttentionParams } from "./attention-params.js";
import { type ModelConfig, attentionWindow, headDim, mamba3Of, mambaOf, moeOf, ropeFrequencies } from "./config.js";
import { mamba2Mixer, mamba2Params, mamba2Problem } from "./mamba2.js";
import { mamba3Mixer, mamba3Params, mamba3Problem } from "./mamba3.js";
import { moeMlp, moeMlpParams, swiGluMlp, swiGluMlpParams } from "./mlp.js";
import { mlaAttention, mlaOf, mlaParams } from "./mla.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

/**
 * Llama forward (rows = B*T, C = hidden, H / KVH heads of D, F = intermediate):
 *   x = embed_tokens[ids]
 *   per layer: h = rmsnorm(x); q,k,v = h·Wq^T, h·Wk^T, h·Wv^T  (rows, H*D | KVH*D)
 *              (Qwen3: q,k = rmsnorm of each head of D, q_norm / k_norm)
 *              q,k = rope(q), rope(k); x += o_proj(attn(q, k, v))   (GQA; a sliding
 *              window in the layers attentionWindow gives one)
 *              x += down_proj(silu(gate_proj(h2)) * up_proj(h2)), h2 = rmsnorm(x)
 *              (or a mixture of such experts when numExperts > 0, mlp.ts;
 *              multi-head latent attention in place of q/k/v when kvLatentDim > 0, mla.ts;
 *              a Mamba2 mixer in place of attention in the layers mambaLayers lists, mamba2.ts,
 *              or a Mamba3 one with mamba3Enabled, mamba3.ts)
 *   logits = norm(x) · lm_head^T (or embed_tokens^T when tied)
 * Weights use torch.nn.Linear's (out, in) layout.
 */
function llamaForward(t: Trace, ids: number, f: FamilyTraits): { hidden: number; head: number } {
  const { g, config: c, p } = t;
  const qkvBias = hasQkvBias(c, f);
  const D = headDim(c);
  const dims = { batch: t.batch, seqLen: t.seqLen, headDim: D, ...ropeFrequencies(c) };
  const moe = moeOf(c);
  const mla = mlaOf(c);
  const mamba = mambaOf(c);
  const mambaMixer = mamba3Of(c) ? mamba3Mixer : mamba2Mixer;
  let x = embedding(g, ids, p("model.embed_tokens.weight"), "embed");
  for (let i = 0; i < c.numLayers; i++) {
    const n = `model.layers.${i}`;
    x = g.withScope(n, () => {
      const h = rmsNorm(g, x, p(`${n}.input_layernorm.weight`), c.normEps, `${n}.input_layernorm`);
      const mixer = mamba?.layers.has(i) ? mambaMixer(t, h, `${n}.mamba`) : mla ? mlaAttention(t, h, `${n}.self_attn`) : gqaAttention(h, n, i);
      const x1 = add(g, x, mixer, `${n}.resid_attn`);
      const h2 = rmsNorm(g, x1, p(`${n}.post_attention_layernorm.weight`), c.normEps, `${n}.post_attention_layernorm`);
      const m = moe ? moeMlp(t, h2, `${n}.mlp`, moe.topK, moe.shared, `${n}.moe`) : swiGluMlp(t, h2, `${n}.mlp`, n, c.mlpBias === true);
      return add(g, x1, m, `${n}.resid_mlp`);
    });
  }
  const xf = rmsNorm(g, x, p("model.norm.weight"), c.normEps, "norm");
  const head = c.tieEmbeddings ? p("model.embed_tokens.weight") : p("lm_head.weight");
  return { hidden: xf, head };

  /** Grouped-query attention of layer i (scope n) with RoPE on whole heads, through o_proj. */
  function gqaAttention(h: number, n: string, i: number): number {
    const proj = (x: "q" | "k" | "v") => linear(g, h, p(`${n}.self_attn.${x}_proj.weight`), qkvBias ? p(`${n}.self_attn.${x}_proj.bias`) : undefined, "out_in", `${n}.${x}`);
    // Qwen3 normalises every head of D on its own: D-element groups of the (rows, heads*D) projection.
    const headNorm = (x: number, which: "q" | "k") => (f.qkNorm ? rmsNorm(g, x, p(`${n}.self_attn.${which}_norm.weight`), c.normEps, `${n}.${which}_norm`, D) : x);
    const q = rope(g, headNorm(proj("q"), "q"), { ...dims, heads: c.numHeads }, `${n}.q_rope`);
    const k = rope(g, headNorm(proj("k"), "k"), { ...dims, heads: c.kvHeads }, `${n}.k_rope`);
    const v = proj("v");
    const window = attentionWindow(c, i);
    const a = attention(
      g,
      { id: q },
      { id: k },
      { id: v },
      { batch: t.batch, seqLen: t.seqLen, heads: c.numHeads, kvHeads: c.kvHeads, headDim: D, ...(window !== undefined ? { window } : {}) },
      {},
      `${n}.attn`,
    );
    return linear(g, a, p(`${n}.self_attn.o_proj.weight`), c.attentionBias ? p(`${n}.self_attn.o_proj.bias`) : undefined, "out_in", `${n}.o`);
  }
}

/** The projections LoRA wraps by default in the Llama family (PEFT's usual choice for them): attention and MLP. */
export const LLAMA_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] as const;

/** What sets a member of the Llama family apart. */
interface FamilyTraits {
  /** Biases on the q, k and v projections always (Qwen2). */
  qkvBias: boolean;
  /** RMSNorm over each query and key head before RoPE (Qwen3's q_norm and k_norm). */
  qkNorm: boolean;
  /** Whether the family computes sliding-window attention, and where config.json says so. */
  slidingWindow: "none" | "every layer" | "layer types";
}

/** Biases on q, k and v: the architecture's own (Qwen2) or the config's attention_bias. */
const hasQkvBias = (c: ModelConfig, f: FamilyTraits) => f.qkvBias || c.attentionBias === true;

function llamaParams(c: ModelConfig, f: FamilyTraits): ParamSpec[] {
  const C = c.hiddenSize;
  const qkvBias = hasQkvBias(c, f);
  const moe = moeOf(c);
  const mamba = mambaOf(c);
  const w = (name: string, shape: number[]): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std: 0.02 } });
  const norm = (name: string): ParamSpec => ({ name, shape: [C], decay: false, init: { kind: "ones" } });
  const specs: ParamSpec[] = [{ name: "model.embed_tokens.weight", shape: [c.vocabSize, C], decay: false, init: { kind: "normal", std: 0.02 } }];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push(
      norm(`${p}.input_layernorm.weight`),
      ...(mamba?.layers.has(i)
        ? (mamba3Of(c) ? mamba3Params : mamba2Params)(`${p}.mamba`, c)
        : mlaOf(c)
        ? mlaParams(`${p}.self_attn`, c)
        : gqaAttentionParams(`${p}.self_attn`, c, { qkvBias, oBias: c.attentionBias === true, ...(f.qkNorm ? { qkNorm: "ones" as const } : {}) })),
      norm(`${p}.post_attention_layernorm.weight`),
      ...(moe ? moeMlpParams(`${p}.mlp`, c, moe.numExperts, moe.shared) : swiGluMlpParams(`${p}.mlp`, c, c.mlpBias === true)),
    );
  }
  specs.push(norm("model.norm.weight"));
  if (!c.tieEmbeddings) specs.push(w("lm_head.weight", [c.vocabSize, C]));
  return specs;
}

/**
 * The Llama family: RoPE, RMSNorm, SwiGLU MLP, grouped-query attention, untied embeddings by
 * default, and the traits of its members (FamilyTraits); the config's attentionBias adds
 * biases to q, k, v and o, its mlpBias to the MLP's.
 */
function llamaFamily(name: string, f: FamilyTraits): ArchDef {
  return {
    ...llamaShared,
    check: (c) => slidingWindowProblem(c, name, f) ?? llamaShared.check(c),
    params: (c) => llamaParams(c, f),
    forward: (t, ids) => llamaForward(t, ids, f),
  };
}

/** Sliding-window settings the family (`name`) does not compute (layer_types' own checks are modelConfigProblem's). */
function slidingWindowProblem(c: ModelConfig, name: string, f: FamilyTraits): ConfigProblem | undefined {
  if (c.slidingWindow === undefined) return undefined;
  if (f.slidingWindow === "none") {
    return { field: "slidingWindow", message: `${name} computes full attention; sliding_window is for arch mistral (every layer), qwen2 and qwen3 (with layer_types)`, hint: "remove sliding_window, or pick one of those architectures" };
  }
  if (f.slidingWindow === "every layer" && c.layerTypes !== undefined) {
    return { field: "layerTypes", message: `${name} slides the window in every layer; layer_types does not apply`, hint: "remove layer_types, or use arch qwen2 / qwen3 for a per-layer pattern" };
  }
  if (mlaOf(c)) {
    return { field: "slidingWindow", message: "multi-head latent attention has no sliding window in kiln", hint: "remove sliding_window, or kv_latent_dim" };
  }
  return undefined;
}

const llamaShared: Omit<ArchDef, "params" | "forward"> = {
  // SwiGLU's inner width: 8/3 of hidden (two-thirds of GPT-2's 4x, as it has three matrices), rounded to 64.
  defaults: (c) => ({ intermediateSize: Math.round((8 * c.hiddenSize) / 3 / 64) * 64, normEps: 1e-6, tieEmbeddings: false }),
  check: (c) => {
    if (headDim(c) % 2 !== 0) {
      return c.headDim === undefined
        ? { field: "numHeads", message: `head size ${headDim(c)} is odd; rotary embeddings need an even head size`, hint: "change hidden_size or num_heads so hidden_size / num_heads is even" }
        : { field: "headDim", message: `head_dim ${c.headDim} is odd; rotary embeddings need an even head size`, hint: "pick an even head_dim" };
    }
    const mla = mlaOf(c);
    if (mla && c.headDim !== undefined) {
      return { field: "headDim", message: "head_dim sizes ordinary attention heads; multi-head latent attention's heads are hidden_size / num_heads wide", hint: "remove head_dim, or kv_latent_dim" };
    }
    if (!mla && (c.qLatentDim || c.ropeDim)) {
      return { field: c.qLatentDim ? "qLatentDim" : "ropeDim", message: `${c.qLatentDim ? "q_latent_dim" : "d_rope"} configures multi-head latent attention, which needs kv_latent_dim too`, hint: "set kv_latent_dim (the key/value latent size), or remove q_latent_dim and d_rope" };
    }
    if (mla && (mla.rope < 2 || mla.rope % 2 !== 0)) {
      return { field: "ropeDim", message: `d_rope ${c.ropeDim ?? "(not set)"} is not an even number >= 2; multi-head latent attention rotates a slice of that size in every head`, hint: "set d_rope to an even size such as 16 (with kv_latent_dim)" };
    }
    const moe = moeOf(c);
    if (moe && c.mlpBias) {
      return { field: "mlpBias", message: "mlp_bias adds biases to the dense MLP; the mixture of experts' projections have none", hint: "remove mlp_bias, or num_experts" };
    }
    if ((mla || mambaOf(c)) && c.attentionBias) {
      return { field: "attentionBias", message: "attention_bias adds biases to the q, k, v and o projections of ordinary attention", hint: "remove attention_bias, or the latent attention / Mamba settings" };
    }
    if (moe && moe.topK > moe.numExperts) {
      return { field: "expertsPerToken", message: `experts_per_tok ${moe.topK} is more than num_experts ${moe.numExperts}`, hint: `route each token to at most ${moe.numExperts} experts, or add experts` };
    }
    return mamba3Problem(c) ?? mamba2Problem(c);
  },
  positionIds: false,
  linearLayout: "out_in",
  loraTargets: LLAMA_LORA_TARGETS,
  blockPrefix: "model.layers",
  // A token multiplies only its top k experts' weights (and the router's and shared expert's).
  inactiveParams: (c) => {
    const moe = moeOf(c);
    return moe ? c.numLayers * (moe.numExperts - moe.topK) * 3 * c.intermediateSize * c.hiddenSize : 0;
  },
};

/** Llama (LlamaForCausalLM). */
export const llama: ArchDef = llamaFamily("llama", { qkvBias: false, qkNorm: false, slidingWindow: "none" });

/** Qwen2 and Qwen2.5 (Qwen2ForCausalLM): Llama with biases on the q, k and v projections. */
export const qwen2: ArchDef = llamaFamily("qwen2", { qkvBias: true, qkNorm: false, slidingWindow: "layer types" });

/** Qwen3 (Qwen3ForCausalLM): Llama with q_norm and k_norm, RMSNorm over each head before RoPE. */
export const qwen3: ArchDef = llamaFamily("qwen3", { qkvBias: false, qkNorm: true, slidingWindow: "layer types" });

/** Mistral (MistralForCausalLM): Llama with a sliding window in every layer when sliding_window is set. */
export const mistral: ArchDef = llamaFamily("mistral", { qkvBias: false, qkNorm: false, slidingWindow: "every layer" });
