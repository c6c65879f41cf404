import { archOf } from "./architectures.js";
import type { ModelConfig } from "./config.js";
import { adapterNames, isLoraTarget } from "./low-rank-adapters.js";
import { paramLayout } from "./param-layout.js";

/** The model without its LoRA adapters: what merging them leaves. */
export function withoutAdapters(model: ModelConfig): ModelConfig {
  if (!model.lora) return model;
  const { lora: _, ...base } = model;
  return base;
}

/**
 * A LoRA model's weights as the plain model's: each target W becomes W + (alpha / rank)·B·A
 * (in W's own layout: (out, in), or GPT-2's (in, out)), summed in float64 and rounded to f32
 * once; the adapters are left out and every other tensor is returned as it is. A model
 * without adapters comes back unchanged.
 */
export function mergeAdapters(model: ModelConfig, weights: ReadonlyMap<string, Float32Array>): { model: ModelConfig; weights: Map<string, Float32Array> } {
  const lora = model.lora;
  if (!lora) return { model, weights: new Map(weights) };
  const base = withoutAdapters(model);
  const transposed = archOf(model).linearLayout === "in_out";
  const scale = lora.alpha / lora.rank;
  const out = new Map<string, Float32Array>();
  for (const s of paramLayout(base).specs) {
    const w = weights.get(s.name)!;
    if (!isLoraTarget(s, lora)) {
      out.set(s.name, w);
      continue;
    }
    const names = adapterNames(s.name);
    const a = weights.get(names.a)!;
    const b = weights.get(names.b)!;
    const [outF, inF] = transposed ? [s.shape[1], s.shape[0]] : s.shape;
    const merged = new Float32Array(w.length);
    const R = lora.rank;
    for (let o = 0; o < outF; o++) {
      for (let i = 0; i < inF; i++) {
        let sum = 0;
        for (let r = 0; r < R; r++) sum += b[o * R + r] * a[r * inF + i];
        const at = transposed ? i * outF + o : o * inF + i;
        merged[at] = w[at] + scale * sum;
      }
    }
    out.set(s.name, merged);
  }
  return { model: base, weights: out };
}
