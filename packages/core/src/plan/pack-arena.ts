import type { Lifetime } from "./liveness.js";

export const ARENA_ALIGN = 64;

export const alignUp = (n: number, a = ARENA_ALIGN) => Math.ceil(n / a) * a;

export interface ArenaPacking {
  /** Tensor id -> byte offset in the arena. */
  offsets: Map<number, number>;
  /** Arena size in bytes: the highest end of any placed tensor. */
  bytes: number;
  /** Sum of every tensor's bytes, as if nothing were reused. */
  unpackedBytes: number;
}

/**
 * Places tensors in one arena so that tensors alive at the same time never
 * overlap: largest first, each at the lowest aligned offset that fits between
 * the tensors already placed whose lifetimes intersect its own.
 */
export function packArena(lifetimes: readonly Lifetime[]): ArenaPacking {
  const order = [...lifetimes].sort((a, b) => b.bytes - a.bytes || a.first - b.first || a.id - b.id);
  const placed: { lt: Lifetime; offset: number; end: number }[] = [];
  const offsets = new Map<number, number>();
  let bytes = 0;
  let unpackedBytes = 0;
  for (const lt of order) {
    const size = alignUp(lt.bytes);
    unpackedBytes += size;
    const busy = placed
      .filter((p) => p.lt.first <= lt.last && lt.first <= p.lt.last)
      .sort((a, b) => a.offset - b.offset);
    let offset = 0;
    for (const p of busy) {
      if (offset + size <= p.offset) break;
      offset = Math.max(offset, p.end);
    }
    placed.push({ lt, offset, end: offset + size });
    offsets.set(lt.id, offset);
    bytes = Math.max(bytes, offset + size);
  }
  return { offsets, bytes, unpackedBytes };
}
