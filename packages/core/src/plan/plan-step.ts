import type { Graph } from "../graph/graph.js";
import { mergeInPlace } from "./in-place.js";
import { tensorLifetimes } from "./liveness.js";
import { type ArenaPacking, alignUp, packArena } from "./pack-arena.js";

/** Byte offsets of the graph's tensors in each buffer of a step, and the size of each buffer. */
export interface StepPlan {
  /** Activation arena, packed by lifetime. */
  arena: ArenaPacking;
  /** Per-step inputs (token ids, targets): id -> byte offset. */
  inputs: Map<number, number>;
  inputBytes: number;
  /** Constants uploaded once (position ids). */
  constants: Map<number, number>;
  constantBytes: number;
  /** Results read back after a run (the loss sum). */
  outputs: Map<number, number>;
  outputBytes: number;
}

const ACTIVATION_KINDS = new Set(["activation"]);

function sequential(g: Graph, kind: string): { offsets: Map<number, number>; bytes: number } {
  const offsets = new Map<number, number>();
  let bytes = 0;
  for (const t of g.tensors) {
    if (t.kind !== kind) continue;
    offsets.set(t.id, bytes);
    bytes += alignUp(g.bytes(t.id));
  }
  return { offsets, bytes };
}

/** Plans every non-parameter buffer of a step: the activation arena and the small I/O buffers. */
export function planStep(g: Graph): StepPlan {
  const inputs = sequential(g, "input");
  const constants = sequential(g, "constant");
  const outputs = sequential(g, "output");
  const merged = mergeInPlace(g, tensorLifetimes(g, ACTIVATION_KINDS));
  const arena = packArena(merged.lifetimes);
  for (const [id, target] of merged.alias) {
    let r = target;
    while (merged.alias.has(r)) r = merged.alias.get(r)!;
    arena.offsets.set(id, arena.offsets.get(r)!);
  }
  return {
    arena,
    inputs: inputs.offsets,
    inputBytes: inputs.bytes,
    constants: constants.offsets,
    constantBytes: constants.bytes,
    outputs: outputs.offsets,
    outputBytes: outputs.bytes,
  };
}
