import type { ParamLayout } from "../model/param-layout.js";
import type { MemoryPlan } from "./memory-plan.js";
import { totalOf } from "./memory-plan.js";

/** Bytes a 16-bit parameter layout of a sharded run aligns each parameter to: half the f32 layout's 64, so offsets halve. */
export const SHARDED_PARAM_ALIGN = 32;

/** Shard sizes are multiples of this many elements, so every chunk a collective moves starts 64-byte aligned. */
const SHARD_ALIGN_ELEMENTS = 16;

/**
 * One rank's part of a sharded optimizer (ZeRO stage 1) over the f32 state layout's
 * `elements` (gradients, AdamW's m and v, master weights, padding included): `chunk`
 * elements per rank, rank r owning [r * chunk, (r + 1) * chunk), and the last rank also
 * the tail [ranks * chunk, elements) that does not divide evenly. The chunks are what the
 * reduce-scatter and all-gather move; the tail (fewer than 16 elements a rank) goes by an
 * all-reduce and a broadcast from the last rank.
 */
export interface OptimizerShard {
  rank: number;
  ranks: number;
  elements: number;
  chunk: number;
  /** The first state element this rank owns, and one past its last. */
  first: number;
  end: number;
}

export function optimizerShard(elements: number, rank: number, ranks: number): OptimizerShard {
  if (!Number.isSafeInteger(ranks) || ranks < 1 || rank < 0 || rank >= ranks) throw new RangeError(`rank ${rank} of ${ranks} is not a data-parallel rank`);
  const chunk = Math.floor(elements / ranks / SHARD_ALIGN_ELEMENTS) * SHARD_ALIGN_ELEMENTS;
  const first = rank * chunk;
  return { rank, ranks, elements, chunk, first, end: rank === ranks - 1 ? elements : first + chunk };
}

/** Elements this rank owns. */
export function ownedElements(s: OptimizerShard): number {
  return s.end - s.first;
}

/** The state elements past the even chunks, [ranks * chunk, elements), owned by the last rank. */
export function shardTail(s: OptimizerShard): { first: number; n: number } {
  return { first: s.ranks * s.chunk, n: s.elements - s.ranks * s.chunk };
}

/**
 * The memory of one rank of a sharded run: AdamW's m and v (and under a 16-bit dtype the
 * f32 masters) for the most any rank owns (the last rank's, with the tail). Gradients and the
 * parameters stay whole (stage 1); 16-bit parameters are laid out at half their state offsets
 * (SHARDED_PARAM_ALIGN), so the all-gather fills them in place.
 */
export function shardedMemory(memory: MemoryPlan, layout: ParamLayout, stateLayout: ParamLayout, ranks: number): MemoryPlan {
  const elements = stateLayout.bytes / 4;
  const owned = ownedElements(optimizerShard(elements, ranks - 1, ranks));
  const mixed = layout.dtype !== "f32";
  return totalOf({
    parameters: layout.bytes + (mixed ? 4 * owned : 0),
    gradients: memory.gradients,
    optimizerState: 2 * 4 * owned,
    activations: memory.activations,
    activationsUnpacked: memory.activationsUnpacked,
    io: memory.io,
  });
}
