import type { Backend, BufferHandle, FloatDType } from "@kiln/contract";
import type { CompiledStep } from "../exec/compiled-step.js";
import type { GradientBucket } from "./gradient-buckets.js";
import type { GradientSync } from "./gradient-sync.js";
import { type OptimizerShard, shardTail } from "./optimizer-shard.js";

/** Lets the event loop run (socket I/O of collectives in flight) between parts of a step. */
const yieldToEventLoop: () => Promise<void> =
  typeof setImmediate === "function" ? () => new Promise((resolve) => setImmediate(resolve)) : () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * A trainer's side of data-parallel training: the gradient buckets of its flat
 * gradient buffer and the all-reduces in flight during one step. Gradients are
 * summed over ranks (each rank's rows already weighted by 1 / the global count
 * of valid targets), so the result is the gradient of the whole global batch.
 */
export class DataParallelSync {
  private readonly inFlight: Promise<void>[] = [];
  /** Buckets handed off during the current step (indices into `buckets`, which is in readiness order). */
  private handedOff = 0;

  constructor(
    readonly sync: GradientSync,
    private readonly backend: Backend,
    readonly buckets: readonly GradientBucket[],
    /** The buffer the buckets cut: the gradients (f32), or their f32 sums under a 16-bit dtype. */
    private readonly gradients: BufferHandle,
    private readonly dtype: FloatDType,
    readonly shard?: OptimizerShard,
  ) {}

  /** `x` summed over the ranks (f64, rank order): the same number on every rank. */
  async sum(x: number): Promise<number> {
    return (await this.sync.allReduceScalars(Float64Array.of(x), "sum"))[0];
  }

  /** Makes `bytes` at the start of each buffer rank 0's on every rank (initial weights, optimizer state). */
  async broadcastFromRankZero(buffers: readonly { buffer: BufferHandle; bytes: number }[]): Promise<void> {
    for (const { buffer, bytes } of buffers) await this.sync.broadcast(this.backend, { buffer, byteOffset: 0 }, bytes, 0);
  }

  /**
   * Runs the whole compiled step, handing each bucket to the communicator right
   * after the last node that writes it, and letting the event loop run there so
   * the transfer can start while the rest of backward runs.
   */
  async runHandingOff(compiled: CompiledStep): Promise<void> {
    let from = 0;
    while (this.handedOff < this.buckets.length) {
      const upTo = this.buckets[this.handedOff].readyAfterNode + 1;
      if (upTo > from) {
        compiled.runNodes(from, upTo);
        from = upTo;
      }
      this.handOff(this.handedOff++);
      await yieldToEventLoop();
    }
    compiled.runNodes(from, compiled.graph.nodes.length);
  }

  /** Hands off every bucket not handed off yet (all of them when backward did not run them out), then waits for all and starts the next step afresh. */
  async finish(): Promise<void> {
    if (this.shard) return this.reduceScatter(this.shard);
    while (this.handedOff < this.buckets.length) this.handOff(this.handedOff++);
    const results = await Promise.allSettled(this.inFlight.splice(0));
    this.handedOff = 0;
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  private async reduceScatter(shard: OptimizerShard): Promise<void> {
    const grads = this.gradients;
    const tail = shardTail(shard);
    if (shard.chunk > 0) await this.sync.reduceScatter(this.backend, { buffer: grads, byteOffset: 0 }, shard.chunk, this.dtype, "sum");
    if (tail.n > 0) await this.sync.allReduce(this.backend, { buffer: grads, byteOffset: 4 * tail.first }, tail.n, this.dtype, "sum");
  }

  private handOff(index: number): void {
    const b = this.buckets[index];
    const done = this.sync.allReduce(this.backend, { buffer: this.gradients, byteOffset: b.byteOffset }, b.elements, this.dtype, "sum");
    done.catch(() => undefined); // reported by finish(); not an unhandled rejection while backward still runs
    this.inFlight.push(done);
  }
}
