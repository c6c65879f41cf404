import { type ModelConfig, headDim } from "./config.js";
import type { ParamSpec } from "./param-layout.js";

/** What a family puts around its q, k, v and o projections. */
export interface AttentionParamOptions {
  /** Biases on q, k and v (zeros). */
  qkvBias: boolean;
  /** A bias on o (zeros). */
  oBias: boolean;
  /** q_norm and k_norm over each head, initialised to ones (Qwen3) or zeros (Gemma's 1 + weight); absent: none. */
  qkNorm?: "ones" | "zeros";
}

/**
 * Grouped-query attention's parameters under `prefix` (a layer's "self_attn"), in the Hugging
 * Face order: q, k, v, o projections (out, in), each followed by its bias, then q_norm, k_norm.
 */
export function gqaAttentionParams(prefix: string, c: ModelConfig, o: AttentionParamOptions): ParamSpec[] {
  const C = c.hiddenSize, D = headDim(c);
  const w = (name: string, shape: number[]): ParamSpec => ({ name: `${prefix}.${name}.weight`, shape, decay: true, init: { kind: "normal", std: 0.02 } });
  const bias = (name: string, size: number, on: boolean): ParamSpec[] => (on ? [{ name: `${prefix}.${name}.bias`, shape: [size], decay: false, init: { kind: "zeros" } }] : []);
  const norm = (name: string): ParamSpec => ({ name: `${prefix}.${name}.weight`, shape: [D], decay: false, init: { kind: o.qkNorm! } });
  return [
    w("q_proj", [c.numHeads * D, C]),
    ...bias("q_proj", c.numHeads * D, o.qkvBias),
    w("k_proj", [c.kvHeads * D, C]),
    ...bias("k_proj", c.kvHeads * D, o.qkvBias),
    w("v_proj", [c.kvHeads * D, C]),
    ...bias("v_proj", c.kvHeads * D, o.qkvBias),
    w("o_proj", [C, c.numHeads * D]),
    ...bias("o_proj", C, o.oBias),
    ...(o.qkNorm ? [norm("q_norm"), norm("k_norm")] : []),
  ];
}
