import { assembleBlocks, attention, gatherBlock, linear, rmsNorm, rope } from "../ops/index.js";
import { type ModelConfig, ropeFrequencies } from "./config.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

/** The multi-head latent attention settings of `c`, or undefined for ordinary attention. */
export function mlaOf(c: ModelConfig): { kvLatent: number; qLatent: number | undefined; rope: number } | undefined {
  if (!c.kvLatentDim) return undefined;
  return { kvLatent: c.kvLatentDim, qLatent: c.qLatentDim || undefined, rope: c.ropeDim ?? 0 };
}

/**
 * Multi-head Latent Attention (DeepSeek-V2) of one layer, on h (rows = B*T, C). With H heads,
 * D = C / H, R = ropeDim, L = kvLatentDim, Lq = qLatentDim (Hugging Face DeepseekV2 names):
 *   q   = rmsnorm(h·q_a_proj^T)·q_b_proj^T  (or h·q_proj^T)      (rows, H*(D+R)), per head [content | rope]
 *   kva = h·kv_a_proj_with_mqa^T                                  (rows, L+R) = [latent | k_rope]
 *   kv  = rmsnorm(latent)·kv_b_proj^T                             (rows, H*2D), per head [k_content | v]
 *   Q = [q_content | rope(q_rope)], K = [k_content | rope(k_rope) for every head], V = v
 *   out = attention(Q, K, V; query/key heads of D+R, value heads of D)·o_proj^T
 * RoPE is Llama's rotate-half convention on the R-wide slices. The slices move between
 * per-head slots and dense tensors with copyStrided; scores are scaled by 1/sqrt(D+R).
 */
export function mlaAttention(t: Trace, h: number, n: string): number {
  const { g, config: c, p } = t;
  const mla = mlaOf(c)!;
  const rows = t.batch * t.seqLen;
  const H = c.numHeads, D = c.hiddenSize / c.numHeads, R = mla.rope, L = mla.kvLatent;
  const Dqk = D + R;
  const ropeDims = { batch: t.batch, seqLen: t.seqLen, headDim: R, ...ropeFrequencies(c) };
  const perHead = (cols: number, offset: number, headStride: number, rowStride: number) => ({ shape: { batch: rows, rows: H, cols }, layout: { offset, rowStride: headStride, batchStride: rowStride } });

  const q = mla.qLatent
    ? linear(g, rmsNorm(g, linear(g, h, p(`${n}.q_a_proj.weight`), undefined, "out_in", `${n}.q_a`), p(`${n}.q_a_layernorm.weight`), c.normEps, `${n}.q_a_layernorm`), p(`${n}.q_b_proj.weight`), undefined, "out_in", `${n}.q`)
    : linear(g, h, p(`${n}.q_proj.weight`), undefined, "out_in", `${n}.q`);
  const qRopeSlots = perHead(R, D, Dqk, H * Dqk);
  const qRope = rope(g, gatherBlock(g, q, qRopeSlots.layout, qRopeSlots.shape, [rows, H * R], `${n}.q_rope_in`), { ...ropeDims, heads: H }, `${n}.q_rope`);

  const kva = linear(g, h, p(`${n}.kv_a_proj_with_mqa.weight`), undefined, "out_in", `${n}.kv_a`);
  const one = (cols: number, offset: number) => ({ shape: { batch: 1, rows, cols }, layout: { offset, rowStride: L + R, batchStride: 0 } });
  const latent = gatherBlock(g, kva, one(L, 0).layout, one(L, 0).shape, [rows, L], `${n}.kv_latent`);
  const kRope = rope(g, gatherBlock(g, kva, one(R, L).layout, one(R, L).shape, [rows, R], `${n}.k_rope_in`), { ...ropeDims, heads: 1 }, `${n}.k_rope`);
  const kv = linear(g, rmsNorm(g, latent, p(`${n}.kv_a_layernorm.weight`), c.normEps, `${n}.kv_a_layernorm`), p(`${n}.kv_b_proj.weight`), undefined, "out_in", `${n}.kv`);

  const qSlots = (cols: number, offset: number) => ({ offset, rowStride: Dqk, batchStride: H * Dqk, cols });
  const Q = assembleBlocks(
    g,
    [rows, H * Dqk],
    [
      { src: q, from: perHead(D, 0, Dqk, H * Dqk).layout, to: qSlots(D, 0), shape: perHead(D, 0, 0, 0).shape },
      { src: qRope, from: { rowStride: R, batchStride: H * R }, to: qSlots(R, D), shape: perHead(R, 0, 0, 0).shape },
    ],
    `${n}.q_heads`,
  );
  const K = assembleBlocks(
    g,
    [rows, H * Dqk],
    [
      { src: kv, from: perHead(D, 0, 2 * D, H * 2 * D).layout, to: qSlots(D, 0), shape: perHead(D, 0, 0, 0).shape },
      // The one rope key of each token, repeated for every head.
      { src: kRope, from: { rowStride: 0, batchStride: R }, to: qSlots(R, D), shape: perHead(R, 0, 0, 0).shape },
    ],
    `${n}.k_heads`,
  );
  const vSlots = perHead(D, D, 2 * D, H * 2 * D);
  const V = gatherBlock(g, kv, vSlots.layout, vSlots.shape, [rows, H * D], `${n}.v`);
  const a = attention(g, { id: Q }, { id: K }, { id: V }, { batch: t.batch, seqLen: t.seqLen, heads: H, kvHeads: H, headDim: Dqk, vHeadDim: D }, {}, `${n}.attn`);
  return linear(g, a, p(`${n}.o_proj.weight`), undefined, "out_in", `${n}.o`);
}

/** The parameters of mlaAttention, in the order of the forward. */
export function mlaParams(n: string, c: ModelConfig): ParamSpec[] {
  const mla = mlaOf(c)!;
  const C = c.hiddenSize, H = c.numHeads, D = C / H, R = mla.rope, L = mla.kvLatent;
  const w = (name: string, shape: number[]): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std: 0.02 } });
  const norm = (name: string, size: number): ParamSpec => ({ name, shape: [size], decay: false, init: { kind: "ones" } });
  return [
    ...(mla.qLatent
      ? [w(`${n}.q_a_proj.weight`, [mla.qLatent, C]), norm(`${n}.q_a_layernorm.weight`, mla.qLatent), w(`${n}.q_b_proj.weight`, [H * (D + R), mla.qLatent])]
      : [w(`${n}.q_proj.weight`, [H * (D + R), C])]),
    w(`${n}.kv_a_proj_with_mqa.weight`, [L + R, C]),
    norm(`${n}.kv_a_layernorm.weight`, L),
    w(`${n}.kv_b_proj.weight`, [H * 2 * D, L]),
    w(`${n}.o_proj.weight`, [C, H * D]),
  ];
}
