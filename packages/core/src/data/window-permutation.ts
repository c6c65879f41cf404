import { philox4x32 } from "../rng/philox.js";

const ROUNDS = 6;
const SHUFFLE_KEY = 0x73687566; // "shuf"

/**
 * A pseudorandom permutation of [0, n) that depends only on (seed, epoch):
 * a balanced Feistel network over the smallest even-bit domain >= n, with
 * Philox as its round function, and cycle-walking back into [0, n).
 * at(i) costs O(1) time and memory, so an epoch of any size needs no table,
 * and any position can be computed on its own (exact resume).
 */
export class WindowPermutation {
  private readonly halfBits: number;
  private readonly halfMask: number;
  private readonly words = new Uint32Array(4);

  constructor(
    readonly n: number,
    readonly seed: number,
    readonly epoch: number,
  ) {
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`permutation size must be a positive integer, got ${n}`);
    let bits = 2;
    while (2 ** bits < n) bits += 2;
    this.halfBits = bits / 2;
    this.halfMask = 2 ** this.halfBits - 1;
  }

  /** The element at position i of the permutation. */
  at(i: number): number {
    if (this.n === 1) return 0;
    let x = i;
    do x = this.encrypt(x);
    while (x >= this.n);
    return x;
  }

  private encrypt(x: number): number {
    const base = 2 ** this.halfBits;
    let left = Math.floor(x / base);
    let right = x % base;
    const epochLow = this.epoch >>> 0;
    const epochHigh = Math.floor(this.epoch / 4294967296) >>> 0;
    for (let round = 0; round < ROUNDS; round++) {
      philox4x32(right, round, epochLow, epochHigh, this.seed >>> 0, SHUFFLE_KEY, this.words);
      const mixed = (left ^ (this.words[0] & this.halfMask)) >>> 0;
      left = right;
      right = mixed;
    }
    return left * base + right;
  }
}
