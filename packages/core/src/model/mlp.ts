import { add, groupedLinear, linear, moeCombine, moeDispatch, moeRoute, swiGlu } from "../ops/index.js";
import type { ModelConfig } from "./config.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

const weight = (name: string, shape: number[]): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std: 0.02 } });

/** down_proj(silu(gate_proj(h)) * up_proj(h)): Llama's MLP, (rows, C) -> (rows, C) through F. */
export function swiGluMlp(t: Trace, h: number, prefix: string, name: string, bias = false): number {
  const { g, p } = t;
  const b = (proj: string) => (bias ? p(`${prefix}.${proj}.bias`) : undefined);
  const gate = linear(g, h, p(`${prefix}.gate_proj.weight`), b("gate_proj"), "out_in", `${name}.gate`);
  const up = linear(g, h, p(`${prefix}.up_proj.weight`), b("up_proj"), "out_in", `${name}.up`);
  return linear(g, swiGlu(g, gate, up, `${name}.swiglu`), p(`${prefix}.down_proj.weight`), b("down_proj"), "out_in", `${name}.down`);
}

/** gate, up and down projections, each with a zero-initialised bias after its weight when `bias` (Llama's mlp_bias). */
export function swiGluMlpParams(prefix: string, c: ModelConfig, bias = false): ParamSpec[] {
  const C = c.hiddenSize, F = c.intermediateSize;
  const withBias = (name: string, shape: number[]): ParamSpec[] => [weight(`${name}.weight`, shape), ...(bias ? [{ name: `${name}.bias`, shape: [shape[0]], decay: false, init: { kind: "zeros" as const } }] : [])];
  return [...withBias(`${prefix}.gate_proj`, [F, C]), ...withBias(`${prefix}.up_proj`, [F, C]), ...withBias(`${prefix}.down_proj`, [C, F])];
}

/**
 * Mixture-of-experts MLP (rows = B*T, C hidden, E experts, k per token, F expert width):
 *   logits = h · gate^T                           (rows, E) router
 *   weights, slots = top-k of softmax(logits)     (rows, k), renormalised over the k
 *   xs = h copied to its k slots                  (rows*k, C), sorted by expert
 *   ys = SwiGLU of each expert over its slots     grouped matmuls, weights (E, F, C) / (E, C, F)
 *   y  = sum_j weights[j] * ys[slot j]            (rows, C)  [+ shared expert's SwiGLU(h)]
 * The layer's load-balancing loss joins t.auxLosses. Parameter names follow the
 * DeepSeek/Qwen-MoE convention, experts stacked in one tensor per projection.
 */
export function moeMlp(t: Trace, h: number, prefix: string, topK: number, shared: boolean, name: string): number {
  const { g, p } = t;
  const r = moeRoute(g, linear(g, h, p(`${prefix}.gate.weight`), undefined, "out_in", `${name}.router`), topK, `${name}.route`);
  t.auxLosses.push(r.auxLoss);
  t.expertOffsets.push(r.offsets);
  const xs = moeDispatch(g, h, r, `${name}.dispatch`);
  const gate = groupedLinear(g, xs, p(`${prefix}.experts.gate_proj.weight`), r.offsets, `${name}.experts.gate`);
  const up = groupedLinear(g, xs, p(`${prefix}.experts.up_proj.weight`), r.offsets, `${name}.experts.up`);
  const ys = groupedLinear(g, swiGlu(g, gate, up, `${name}.experts.swiglu`), p(`${prefix}.experts.down_proj.weight`), r.offsets, `${name}.experts.down`);
  const y = moeCombine(g, ys, r, `${name}.combine`);
  return shared ? add(g, y, swiGluMlp(t, h, `${prefix}.shared_experts`, `${name}.shared`), `${name}.out`) : y;
}

export function moeMlpParams(prefix: string, c: ModelConfig, numExperts: number, shared: boolean): ParamSpec[] {
  const C = c.hiddenSize, F = c.intermediateSize, E = numExperts;
  return [
    weight(`${prefix}.gate.weight`, [E, C]),
    weight(`${prefix}.experts.gate_proj.weight`, [E, F, C]),
    weight(`${prefix}.experts.up_proj.weight`, [E, F, C]),
    weight(`${prefix}.experts.down_proj.weight`, [E, C, F]),
    ...(shared ? swiGluMlpParams(`${prefix}.shared_experts`, c) : []),
  ];
}
