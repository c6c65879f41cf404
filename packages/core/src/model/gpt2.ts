import { add, attention, embedding, gelu, layerNorm, linear } from "../ops/index.js";
import type { Trace } from "./trace.js";

/**
 * GPT-2 forward (B = batch, T = seqLen, C = hidden, V = vocab), rows = B*T:
 *   x = wte[ids] + wpe[positions]                        (rows, C)
 *   per layer: x += c_proj(attn(c_attn(ln_1(x))))         qkv packed (rows, 3C)
 *              x += mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))  (rows, 4C) inside
 *   logits = ln_f(x) · wte^T                              (rows, V), tied
 * Weights use Conv1D's (in, out) layout, as Hugging Face stores them.
 */
export function gpt2Forward(t: Trace, ids: number, positions: number): number {
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
  return linear(g, xf, head, undefined, "out_in", "logits");
}
