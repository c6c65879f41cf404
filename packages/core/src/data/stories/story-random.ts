/**
 * A small seeded generator (mulberry32) for the story grammar: 32-bit integer
 * arithmetic only, so the same seed gives the same stories on every platform.
 */
export class StoryRandom {
  private state: number;

  constructor(seed: number) {
    this.state = (seed ^ 0x5f3759df) >>> 0;
  }

  /** Uniform u32. */
  nextU32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.nextU32() / 4294967296) * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  /** Two different items. */
  pickTwo<T>(items: readonly T[]): [T, T] {
    const a = this.int(items.length);
    const b = (a + 1 + this.int(items.length - 1)) % items.length;
    return [items[a], items[b]];
  }

  chance(p: number): boolean {
    return this.nextU32() / 4294967296 < p;
  }
}
