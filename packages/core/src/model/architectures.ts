import type { ArchDef, ConfigProblem } from "./arch-def.js";
import type { ModelConfig, ModelConfigInput } from "./config.js";
import { gemma3 } from "./gemma3.js";
import { gpt2 } from "./gpt2.js";
import { llama, mistral, qwen2, qwen3 } from "./llama.js";

/** The architectures kiln trains, by the name a config's `arch` gives. */
export const ARCHITECTURES = { gpt2, llama, qwen2, qwen3, mistral, gemma3 } as const satisfies Record<string, ArchDef>;

export type Arch = keyof typeof ARCHITECTURES;

/** Every architecture name, for schemas and messages. */
export const ARCH_NAMES = Object.keys(ARCHITECTURES) as [Arch, ...Arch[]];

export function archOf(c: Pick<ModelConfig, "arch">): ArchDef {
  return ARCHITECTURES[c.arch];
}

/**
 * The first shape of `c` kiln cannot build: the checks every architecture shares
 * (heads divide the hidden size unless the head size is given, key/value heads divide the
 * heads, layer_types fit the layers and have a window, Gemma's keys only on gemma3), then its own.
 */
export function modelConfigProblem(c: ModelConfig): ConfigProblem | undefined {
  if (c.headDim === undefined && c.hiddenSize % c.numHeads !== 0) {
    const fit = Math.ceil(c.hiddenSize / c.numHeads) * c.numHeads;
    return { field: "hiddenSize", message: `hidden size ${c.hiddenSize} is not divisible by the ${c.numHeads} heads`, hint: `pick a hidden_size that is a multiple of ${c.numHeads} (e.g. ${fit}) or change num_heads` };
  }
  if (c.numHeads % c.kvHeads !== 0) {
    return { field: "kvHeads", message: `${c.numHeads} attention heads are not a multiple of the ${c.kvHeads} key/value heads`, hint: "kv_heads must divide num_heads (grouped-query attention)" };
  }
  if (c.layerTypes !== undefined && c.layerTypes.length !== c.numLayers) {
    return { field: "layerTypes", message: `layer_types lists ${c.layerTypes.length} layers; the model has ${c.numLayers}`, hint: "give one type per layer, or remove layer_types" };
  }
  if (c.slidingWindow === undefined && c.layerTypes?.includes("sliding_attention")) {
    return { field: "layerTypes", message: "layer_types marks sliding_attention layers but sliding_window is not set", hint: "set sliding_window (the keys each query sees), or mark every layer full_attention" };
  }
  for (const [field, key] of [["queryPreAttnScalar", "query_pre_attn_scalar"], ["ropeLocalTheta", "rope_local_base_freq"]] as const) {
    if (c.arch !== "gemma3" && c[field] !== undefined) return { field, message: `${key} is a Gemma 3 setting; ${c.arch} does not use it`, hint: `remove ${key}, or use arch: gemma3` };
  }
  return archOf(c).check(c);
}

/** Fills the defaults: multi-head attention, RoPE base 10000, and the architecture's own (ArchDef.defaults). */
export function resolveModelConfig(c: ModelConfigInput): ModelConfig {
  const d = ARCHITECTURES[c.arch].defaults(c);
  return {
    ...c,
    kvHeads: c.kvHeads ?? c.numHeads,
    intermediateSize: c.intermediateSize ?? d.intermediateSize,
    ropeTheta: c.ropeTheta ?? 10000,
    normEps: c.normEps ?? d.normEps,
    tieEmbeddings: c.tieEmbeddings ?? d.tieEmbeddings,
  };
}
