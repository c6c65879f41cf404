import type { CompiledStep } from "../exec/compiled-step.js";

/**
 * Tokens routed to each expert of each mixture-of-experts layer, summed over the
 * micro-batches of a step, from the layers' i32 (E + 1) slot offsets (expert e's
 * count is offsets[e + 1] - offsets[e]).
 */
export class ExpertLoad {
  private readonly counts: Float64Array[];
  private readonly host: Int32Array;

  constructor(
    private readonly offsets: readonly number[],
    numExperts: number,
  ) {
    this.counts = offsets.map(() => new Float64Array(numExperts));
    this.host = new Int32Array(numExperts + 1);
  }

  reset(): void {
    for (const c of this.counts) c.fill(0);
  }

  /** Adds the routing of the micro-batch `step` just ran. */
  async add(step: CompiledStep): Promise<void> {
    for (let layer = 0; layer < this.offsets.length; layer++) {
      await step.download(this.offsets[layer], this.host);
      const c = this.counts[layer];
      for (let e = 0; e < c.length; e++) c[e] += this.host[e + 1] - this.host[e];
    }
  }

  /**
   * The busiest expert's tokens over an even share, the largest over layers: 1 when perfectly
   * even, E/k (its most) when every token picks the same k experts.
   */
  imbalance(): number {
    let worst = 0;
    for (const c of this.counts) {
      const total = c.reduce((s, x) => s + x, 0);
      if (total > 0) worst = Math.max(worst, (Math.max(...c) * c.length) / total);
    }
    return worst;
  }
}
