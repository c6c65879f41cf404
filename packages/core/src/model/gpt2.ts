import { add, attention, embedding, gelu, layerNorm, linear } from "../ops/index.js";
import type { ArchDef } from "./arch-def.js";
import type { ModelConfig } from "./config.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

/**
 * GPT-2 forward (B = batch, T = seqLen, C = hidden, V = vocab), rows = B*T:
 *   x = wte[ids] + wpe[positions]                        (rows, C)
 *   per layer: x += c_proj(attn(c_attn(ln_1(x))))         qkv packed (rows, 3C)
 *              x += mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))  (rows, 4C) inside
 *   logits = ln_f(x) · wte^T                              (rows, V), tied
 * Weights use Conv1D's (in, out) layout, as Hugging Face stores them.
 */
function gpt2Forward(t: Trace, ids: number, positions: number): { hidden: number; head: number } {
  const { g, config: c, p } = t;
  const C = c.hiddenSize;
  const D = C / c.numHeads;
  let x = add(g, embedding(g, ids, p("transformer.wte.weight"), "wte"), embedding(g, positions, p("transformer.wpe.weight"), "wpe"), "embed");
  for (let i = 0; i < c.numLayers; i++) {
    const n = `transformer.h.${i}`;
    x = g.withScope(n, () => {
      const h = layerNorm(g, x, p(`${n}.ln_1.weight`), p(`${n}.ln_1.bias`), c.normEps, `${n}.ln_1`);
      const qkv = linear(g, h, p(`${n}.attn.c_attn.weight`), p(`${n}.attn.c_attn.bias`), "in_out", `${n}.attn.qkv`);
      const a = attention(
        g,
        { id: qkv, offset: 0 },
        { id: qkv, offset: C },
        { id: qkv, offset: 2 * C },
        { batch: t.batch, seqLen: t.seqLen, heads: c.numHeads, kvHeads: c.numHeads, headDim: D },
        { qRowStride: 3 * C, kvRowStride: 3 * C },
        `${n}.attn.out`,
      );
      const o = linear(g, a, p(`${n}.attn.c_proj.weight`), p(`${n}.attn.c_proj.bias`), "in_out", `${n}.attn.proj`);
      const x1 = add(g, x, o, `${n}.resid_attn`);
      const h2 = layerNorm(g, x1, p(`${n}.ln_2.weight`), p(`${n}.ln_2.bias`), c.normEps, `${n}.ln_2`);
      const f = gelu(g, linear(g, h2, p(`${n}.mlp.c_fc.weight`), p(`${n}.mlp.c_fc.bias`), "in_out", `${n}.mlp.fc`), `${n}.mlp.gelu`);
      const m = linear(g, f, p(`${n}.mlp.c_proj.weight`), p(`${n}.mlp.c_proj.bias`), "in_out", `${n}.mlp.proj`);
      return add(g, x1, m, `${n}.resid_mlp`);
    });
  }
  const xf = layerNorm(g, x, p("transformer.ln_f.weight"), p("transformer.ln_f.bias"), c.normEps, "ln_f");
  const head = c.tieEmbeddings ? p("transformer.wte.weight") : p("lm_head.weight");
  return { hidden: xf, head };
}

function gpt2Params(c: ModelConfig): ParamSpec[] {
  const C = c.hiddenSize, F = c.intermediateSize;
  const w = (name: string, shape: number[], std = 0.02): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std } });
  const b = (name: string, n: number): ParamSpec => ({ name, shape: [n], decay: false, init: { kind: "zeros" } });
  const ln = (p: string): ParamSpec[] => [{ name: `${p}.weight`, shape: [C], decay: false, init: { kind: "ones" } }, b(`${p}.bias`, C)];
  // GPT-2 scales the init of projections into the residual stream by 1/sqrt(2 * layers).
  const proj = 0.02 / Math.sqrt(2 * c.numLayers);
  const specs: ParamSpec[] = [
    { name: "transformer.wte.weight", shape: [c.vocabSize, C], decay: false, init: { kind: "normal", std: 0.02 } },
    { name: "transformer.wpe.weight", shape: [c.maxSeqLen, C], decay: false, init: { kind: "normal", std: 0.02 } },
  ];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `transformer.h.${i}`;
    specs.push(
      ...ln(`${p}.ln_1`),
      w(`${p}.attn.c_attn.weight`, [C, 3 * C]),
      b(`${p}.attn.c_attn.bias`, 3 * C),
      w(`${p}.attn.c_proj.weight`, [C, C], proj),
      b(`${p}.attn.c_proj.bias`, C),
      ...ln(`${p}.ln_2`),
      w(`${p}.mlp.c_fc.weight`, [C, F]),
      b(`${p}.mlp.c_fc.bias`, F),
      w(`${p}.mlp.c_proj.weight`, [F, C], proj),
      b(`${p}.mlp.c_proj.bias`, C),
    );
  }
  specs.push(...ln("transformer.ln_f"));
  if (!c.tieEmbeddings) specs.push(w("lm_head.weight", [c.vocabSize, C]));
  return specs;
}

/** GPT-2: learned positions, LayerNorm, GELU MLP of 4x hidden, tied embeddings, multi-head attention only. */
export const gpt2: ArchDef = {
  defaults: (c) => ({ intermediateSize: 4 * c.hiddenSize, normEps: 1e-5, tieEmbeddings: true }),
  check: (c) => {
    if (c.headDim !== undefined && c.headDim !== c.hiddenSize / c.numHeads) {
      return { field: "headDim", message: `head_dim ${c.headDim} is not hidden_size / num_heads (${c.hiddenSize / c.numHeads}); GPT-2's heads split the hidden size`, hint: "remove head_dim or use arch: llama" };
    }
    if (c.kvHeads !== c.numHeads) return { field: "kvHeads", message: "the gpt2 architecture has no grouped-query attention", hint: "remove kv_heads or use arch: llama" };
    if (c.numExperts) return { field: "numExperts", message: "kiln's gpt2 architecture has no mixture-of-experts MLP", hint: "remove num_experts or use arch: llama" };
    if (c.kvLatentDim || c.qLatentDim || c.ropeDim) {
      const field = c.kvLatentDim ? "kvLatentDim" : c.qLatentDim ? "qLatentDim" : "ropeDim";
      return { field, message: "kiln's gpt2 architecture has no multi-head latent attention", hint: "remove kv_latent_dim, q_latent_dim and d_rope, or use arch: llama" };
    }
    if (c.mambaLayers?.length) return { field: "mambaLayers", message: "kiln's gpt2 architecture has no Mamba2 layers", hint: "remove mamba_layers and the mamba2_* keys, or use arch: llama" };
    if (c.slidingWindow !== undefined || c.layerTypes !== undefined) {
      return { field: c.slidingWindow !== undefined ? "slidingWindow" : "layerTypes", message: "GPT-2 attends to the whole sequence; kiln's gpt2 architecture has no sliding window", hint: "remove sliding_window and layer_types, or use arch: mistral" };
    }
    return undefined;
  },
  params: gpt2Params,
  positionIds: true,
  forward: (t, ids, positions) => gpt2Forward(t, ids, positions!),
  linearLayout: "in_out",
  loraTargets: ["c_attn", "c_proj", "c_fc"],
  blockPrefix: "transformer.h",
  inactiveParams: (c) => c.maxSeqLen * c.hiddenSize,
};
