import { ConfigError, type FloatDType } from "@kiln/contract";
import { Graph } from "../graph/graph.js";
import type { ModelConfig } from "./config.js";
import type { ParamLayout } from "./param-layout.js";
import { adapterNames, isLoraTarget, moduleOf } from "./low-rank-adapters.js";

/** A graph being traced from a model, with its parameters registered by name. */
export interface Trace {
  g: Graph;
  config: ModelConfig;
  batch: number;
  seqLen: number;
  dtype: FloatDType;
  /** Parameter tensor by Hugging Face name. */
  p(name: string): number;
  /** f32 [1] auxiliary losses the layers add to the objective (mixture-of-experts load balancing). */
  auxLosses: number[];
  /** i32 (E + 1) expert offsets of each mixture-of-experts layer (moeRoute's), for the experts' load. */
  expertOffsets: number[];
}

/** Every LoRA adapter of the trace went into a linear layer: a target applied otherwise (a split projection, the tied head) is refused, named. */
export function checkAdaptersApplied(t: Trace): void {
  for (const [w, adapter] of t.g.adapters) {
    if (adapter.applied) continue;
    const name = t.g.info(w).name;
    throw new ConfigError(`LoRA cannot wrap ${name}: kiln applies it other than as one linear layer`, {
      where: "--lora-targets",
      hint: `leave ${moduleOf(name)} out of --lora-targets (the attention and MLP projections take adapters)`,
    });
  }
}

export function startTrace(config: ModelConfig, layout: ParamLayout, batch: number, seqLen: number, training = false): Trace {
  const g = new Graph();
  const params = new Map<string, number>();
  for (const s of layout.specs) params.set(s.name, g.tensor(s.shape, layout.dtype, "param", s.name, undefined, s.frozen));
  const lora = config.lora;
  if (lora) {
    for (const s of layout.specs) {
      if (!s.frozen || !isLoraTarget(s, lora)) continue;
      const { a, b } = adapterNames(s.name);
      g.adapters.set(params.get(s.name)!, { a: params.get(a)!, b: params.get(b)!, scale: lora.alpha / lora.rank, dropout: training ? (lora.dropout ?? 0) : 0, applied: false });
    }
  }
  return {
    g,
    config,
    batch,
    seqLen,
    dtype: layout.dtype,
    auxLosses: [],
    expertOffsets: [],
    p(name) {
      const id = params.get(name);
      if (id === undefined) throw new Error(`model has no parameter ${name}`);
      return id;
    },
  };
}
