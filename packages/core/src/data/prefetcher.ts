import type { Batch } from "./batch.js";
import type { BatchPlan, BatchSampler, SamplerCursor } from "./batch-sampler.js";

interface PendingBatch {
  plan: BatchPlan;
  slot: Batch;
  loaded: Promise<Batch>;
}

/**
 * Keeps `depth` batches being read ahead of the one in use, so file reads
 * overlap compute. Batches live in depth + 1 buffers allocated once: a batch
 * returned by next() stays valid until the following next() call, when its
 * buffer is reused for reading ahead.
 */
export class Prefetcher {
  private readonly free: Batch[] = [];
  private readonly pending: PendingBatch[] = [];
  private inUse: Batch | undefined;
  private consumed: SamplerCursor;
  private closed = false;

  constructor(
    readonly sampler: BatchSampler,
    readonly depth = 2,
  ) {
    if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`prefetch depth must be a positive integer, got ${depth}`);
    for (let i = 0; i <= depth; i++) this.free.push(sampler.allocateBatch());
    this.consumed = sampler.getCursor();
    this.fill();
  }

  /** The next batch; the previous one's buffers are reused from now on. */
  async next(): Promise<Batch> {
    if (this.closed) throw new Error("next() on a closed prefetcher");
    if (this.inUse !== undefined) {
      this.free.push(this.inUse);
      this.inUse = undefined;
    }
    this.fill();
    const head = this.pending.shift()!;
    this.fill(); // the buffer just released starts its read before we wait
    try {
      await head.loaded;
    } catch (err) {
      this.free.push(head.slot);
      throw err;
    }
    this.inUse = head.slot;
    this.consumed = head.plan.cursorAfter;
    return head.slot;
  }

  /** The cursor just past the last batch next() returned: what a checkpoint saves (not the read-ahead position). */
  getCursor(): SamplerCursor {
    return { ...this.consumed };
  }

  /** Fractional epochs of the batches returned so far. */
  get epochProgress(): number {
    return this.sampler.epochOf(this.consumed);
  }

  /** Drops what was read ahead and continues from `cursor`. */
  async setCursor(cursor: SamplerCursor): Promise<void> {
    await this.drain();
    this.sampler.setCursor(cursor);
    this.consumed = this.sampler.getCursor();
    this.fill();
  }

  /** Waits for reads in flight; the sampler's dataset stays open. */
  async close(): Promise<void> {
    this.closed = true;
    await this.drain();
  }

  private async drain(): Promise<void> {
    const inFlight = this.pending.splice(0);
    await Promise.allSettled(inFlight.map((p) => p.loaded));
    for (const p of inFlight) this.free.push(p.slot);
    // Reads ahead moved the sampler; put it back where consumption stands.
    this.sampler.setCursor(this.consumed);
  }

  private fill(): void {
    while (!this.closed && this.pending.length < this.depth && this.free.length > 0) {
      const slot = this.free.pop()!;
      const plan = this.sampler.planNext();
      const loaded = this.sampler.load(plan, slot);
      loaded.catch(() => undefined); // reported by next(); not an unhandled rejection meanwhile
      this.pending.push({ plan, slot, loaded });
    }
  }
}
