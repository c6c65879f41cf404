import type { Backend, BufferHandle } from "@kiln/contract";
import { type ParamLayout, halvesStateOffsets } from "../model/param-layout.js";
import type { GradientSync } from "./gradient-sync.js";
import { type OptimizerShard, ownedElements, shardTail } from "./optimizer-shard.js";

/**
 * The weights of a rank under a sharded optimizer (ZeRO stage 1). Every rank holds all
 * the parameters in the training dtype; AdamW updates only the elements the rank owns,
 * and publish() spreads each owner's elements to every rank (all-gather of the even
 * chunks, broadcast of the last rank's tail).
 *
 * f32: the parameters are their own weights, and the trained ones are the parameter
 * buffer's prefix in state-layout order, so the gather runs in place there.
 * bf16/f16: the f32 masters of the owned elements alone, which AdamW rounds into the
 * parameters; those lie at half their state offsets (halvesStateOffsets: the plan of a
 * sharded run lays them out so), so they too are in state order and gathered in place.
 */
export class ShardedWeights {
  /** 16-bit: f32 master weights of the owned state elements (element `shard.first` at byte 0). */
  readonly master: BufferHandle | undefined;
  private readonly width: number;

  constructor(
    private readonly backend: Backend,
    private readonly layout: ParamLayout,
    private readonly stateLayout: ParamLayout,
    private readonly params: BufferHandle,
    readonly shard: OptimizerShard,
  ) {
    const mixed = layout.dtype !== "f32";
    this.width = mixed ? 2 : 4;
    if (mixed && !halvesStateOffsets(layout, stateLayout)) throw new Error("a sharded optimizer's 16-bit parameters must lie at half their state offsets: plan the run for its ranks (planTraining's shardRanks)");
    if (mixed) this.master = backend.alloc(Math.max(4, 4 * ownedElements(shard)));
  }

  /** Device bytes this holds beyond the parameters. */
  get allocatedBytes(): number {
    return this.master?.byteLength ?? 0;
  }

  /** 16-bit: rounds the owned masters into the parameters (after they were written, before publish()). */
  roundOwnedMasters(): void {
    const n = ownedElements(this.shard);
    if (!this.master || n === 0) return;
    this.backend.kernels.cast({ src: { buffer: this.master, byteOffset: 0 }, dst: { buffer: this.params, byteOffset: 2 * this.shard.first }, n, srcDtype: "f32", dstDtype: this.layout.dtype });
  }

  /** Every rank takes each owner's trained parameters (a collective: every rank calls it). */
  async publish(sync: GradientSync): Promise<void> {
    const { chunk, ranks } = this.shard;
    const tail = shardTail(this.shard);
    const w = this.width;
    if (chunk > 0) await sync.allGather(this.backend, { buffer: this.params, byteOffset: 0 }, chunk * w);
    if (tail.n > 0) await sync.broadcast(this.backend, { buffer: this.params, byteOffset: tail.first * w }, tail.n * w, ranks - 1);
  }

  dispose(): void {
    if (this.master) this.backend.free(this.master);
  }
}

/**
 * The part of `values` (a trained parameter's, from its element `from` on, whose first
 * element is state element `e0`) that falls in [shard.first, shard.end): where it starts
 * in `values`, how many, and its offset in a buffer of owned elements.
 */
export function ownedPart(shard: OptimizerShard, e0: number, from: number, length: number): { skip: number; n: number; ownOffset: number } | undefined {
  const a = Math.max(e0 + from, shard.first);
  const b = Math.min(e0 + from + length, shard.end);
  if (a >= b) return undefined;
  return { skip: a - (e0 + from), n: b - a, ownOffset: a - shard.first };
}
