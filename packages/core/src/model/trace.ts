import type { FloatDType } from "@kiln/contract";
import { Graph } from "../graph/graph.js";
import type { ModelConfig } from "./config.js";
import type { ParamLayout } from "./param-layout.js";

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

export function startTrace(config: ModelConfig, layout: ParamLayout, batch: number, seqLen: number): Trace {
  const g = new Graph();
  const params = new Map<string, number>();
  for (const s of layout.specs) params.set(s.name, g.tensor(s.shape, layout.dtype, "param", s.name));
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
