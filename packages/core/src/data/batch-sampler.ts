import { ConfigError, DataError } from "@kiln/contract";
import type { Batch } from "./batch.js";
import { TRAINED } from "./examples/example-mask-bits.js";
import { splitExamples } from "./examples/example-split.js";
import type { TokenDataset } from "./token-dataset.js";
import { DEFAULT_VAL_FRACTION, type DataSplit, splitTokens, windowsIn } from "./token-split.js";
import { WindowPermutation } from "./window-permutation.js";

export interface BatchSamplerOptions {
  batchSize: number;
  seqLen: number;
  seed: number;
  /** Which part of the token stream to draw from (default "train"). */
  split?: DataSplit;
  /** Fraction of the stream, at its end, that is validation data (default 0.01). */
  valFraction?: number;
  /** Visit windows in a seeded per-epoch shuffle (default true) or in file order. */
  shuffle?: boolean;
  /** Data-parallel rank and number of ranks: each rank gets its own windows of every global batch. */
  rank?: number;
  worldSize?: number;
  /**
   * An example file: pack consecutive examples into each row (as many as fit, in file order;
   * the rows are then what an epoch visits) instead of one example a row, with the batches'
   * docStarts saying where each example begins (default false).
   */
  pack?: boolean;
}

/** Where a sampler is: `index` windows of epoch `epoch` have been handed out (by all ranks). JSON-serializable. */
export interface SamplerCursor {
  epoch: number;
  index: number;
}

/** The windows of one batch, chosen but not yet read. */
export interface BatchPlan {
  /** First token of each window, one per batch row. */
  starts: Float64Array;
  cursorBefore: SamplerCursor;
  cursorAfter: SamplerCursor;
}

/**
 * Draws batches of next-token windows from a TokenDataset. The split's tokens are
 * cut into non-overlapping windows on a grid (starts seqLen apart, seqLen + 1 tokens
 * each, so ids = tokens[s, s+seqLen) and targets = tokens[s+1, s+seqLen]); each epoch
 * visits every window once, in an order that depends only on (seed, epoch). The
 * cursor says how far the sampler has gone, so a resumed run continues exactly.
 *
 * An example file (the dataset has `examples`) is drawn by examples instead: each
 * row holds one example from its first token (cut to seqLen + 1 tokens), padded
 * after it with ignored targets, and a target counts only where the loss mask
 * trains it; so attention never crosses from one example into another. The
 * validation split is the last examples. Packed (`pack`), each row holds consecutive
 * examples, each at the positions it would take alone (its tokens but the last as ids,
 * the next ones as targets), the rest of the row padding, and the batches' docStarts
 * keep attention inside each example.
 */
export class BatchSampler {
  readonly batchSize: number;
  readonly seqLen: number;
  readonly seed: number;
  readonly split: DataSplit;
  readonly shuffle: boolean;
  readonly rank: number;
  readonly worldSize: number;
  /** First token of the split in the dataset. */
  readonly splitStart: number;
  /** Tokens in the split. */
  readonly splitTokens: number;
  /** Windows per epoch. */
  readonly windowCount: number;

  /** Index of the split's first example, for an example file, and how many the split holds. */
  private readonly firstExample: number = 0;
  private readonly exampleCount: number = 0;
  /** Packed: the first example of each row (split-relative), and one more entry: the split's example count. */
  private readonly packedRows: Int32Array | undefined;
  /** Windows handed out since epoch 0 began, over all ranks. */
  private position = 0;
  private permutation: WindowPermutation | undefined;
  private readonly scratchPool: Int32Array[] = [];

  constructor(
    readonly dataset: TokenDataset,
    options: BatchSamplerOptions,
  ) {
    const { batchSize, seqLen, seed, split = "train", valFraction = DEFAULT_VAL_FRACTION, shuffle = true, rank = 0, worldSize = 1 } = options;
    positiveInteger(batchSize, "batch_size");
    positiveInteger(seqLen, "seq_len");
    positiveInteger(worldSize, "world_size");
    if (!Number.isSafeInteger(seed)) throw new ConfigError(`seed must be an integer, got ${seed}`, { where: "seed" });
    if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new ConfigError(`rank ${rank} is outside [0, ${worldSize})`, { where: "rank" });
    this.batchSize = batchSize;
    this.seqLen = seqLen;
    this.seed = seed;
    this.split = split;
    this.shuffle = shuffle;
    this.rank = rank;
    this.worldSize = worldSize;

    const examples = dataset.examples;
    if (examples !== undefined) {
      const { trainExamples, valExamples } = splitExamples(examples.count, valFraction, dataset.path);
      const first = split === "train" ? 0 : trainExamples;
      this.windowCount = split === "train" ? trainExamples : valExamples;
      this.splitStart = examples.starts[first];
      this.splitTokens = examples.starts[first + this.windowCount] - this.splitStart;
      this.firstExample = first;
      this.exampleCount = this.windowCount;
      if (options.pack) {
        this.packedRows = packExamples(examples.starts, first, this.windowCount, seqLen);
        this.windowCount = this.packedRows.length - 1;
      }
    } else {
      const { trainTokens, valTokens } = splitTokens(dataset.tokenCount, seqLen, valFraction, dataset.path);
      this.splitStart = split === "train" ? 0 : trainTokens;
      this.splitTokens = split === "train" ? trainTokens : valTokens;
      this.windowCount = windowsIn(this.splitTokens, seqLen);
    }
    if (this.windowCount === 0) {
      throw new DataError(
        valFraction === 0
          ? "there is no validation data: the validation fraction is 0"
          : `the data (${dataset.tokenCount} tokens) is too small for a validation split of whole ${seqLen + 1}-token windows next to a training one`,
        { where: dataset.path, hint: "Use a validation fraction above 0 (for example 0.01), add more text, or lower seq_len." },
      );
    }
  }

  /** Tokens in one batch (batchSize * seqLen). */
  get tokensPerBatch(): number {
    return this.batchSize * this.seqLen;
  }

  /** Global batches (all ranks together) per epoch, as a fraction when windows do not divide evenly. */
  get batchesPerEpoch(): number {
    return this.windowCount / (this.batchSize * this.worldSize);
  }

  getCursor(): SamplerCursor {
    return this.cursorAt(this.position);
  }

  setCursor(cursor: SamplerCursor): void {
    const { epoch, index } = cursor;
    if (!Number.isSafeInteger(epoch) || epoch < 0 || !Number.isSafeInteger(index) || index < 0 || index >= this.windowCount) {
      throw new DataError(`data cursor {epoch: ${epoch}, index: ${index}} does not fit this data's ${this.windowCount} windows per epoch`, {
        where: this.dataset.path,
        hint: "Resume with the same data file, seq_len and validation fraction the checkpoint was trained with.",
      });
    }
    this.position = epoch * this.windowCount + index;
  }

  /** Epochs completed so far, with the current one as a fraction (1.25 = a quarter into the second). */
  get epochProgress(): number {
    return this.epochOf(this.getCursor());
  }

  epochOf(cursor: SamplerCursor): number {
    return cursor.epoch + cursor.index / this.windowCount;
  }

  /** First token of the window at `index` in epoch `epoch`'s order. */
  windowStart(epoch: number, index: number): number {
    let window = index;
    if (this.shuffle) {
      if (this.permutation === undefined || this.permutation.epoch !== epoch) {
        this.permutation = new WindowPermutation(this.windowCount, this.seed, epoch);
      }
      window = this.permutation.at(index);
    }
    const examples = this.dataset.examples;
    // Packed rows are named by their index (loadPacked reads their examples).
    if (this.packedRows !== undefined) return window;
    if (examples !== undefined) return examples.starts[this.firstExample + window];
    return this.splitStart + window * this.seqLen;
  }

  /** Examples of the split longer than a row (seqLen + 1 tokens), which rows cut; 0 for a token file. */
  examplesCut(): number {
    const examples = this.dataset.examples;
    let n = 0;
    if (examples === undefined) return n;
    for (let i = this.firstExample; i < this.firstExample + this.exampleCount; i++) if (examples.starts[i + 1] - examples.starts[i] > this.seqLen + 1) n++;
    return n;
  }

  /** Chooses this rank's windows of the next global batch and moves the cursor past all ranks' windows. */
  planNext(): BatchPlan {
    const cursorBefore = this.getCursor();
    const starts = new Float64Array(this.batchSize);
    const first = this.position + this.rank * this.batchSize;
    for (let row = 0; row < this.batchSize; row++) {
      const p = first + row;
      starts[row] = this.windowStart(Math.floor(p / this.windowCount), p % this.windowCount);
    }
    this.position += this.batchSize * this.worldSize;
    return { starts, cursorBefore, cursorAfter: this.getCursor() };
  }

  /** Reads a planned batch's windows into `into` (or a new batch). */
  async load(plan: BatchPlan, into: Batch = this.allocateBatch()): Promise<Batch> {
    const { batchSize, seqLen } = this;
    const n = batchSize * seqLen;
    if (into.ids.length !== n || into.targets.length !== n) {
      throw new RangeError(`a batch of ${batchSize} x ${seqLen} needs ${n} ids and targets, got ${into.ids.length} and ${into.targets.length}`);
    }
    const span = seqLen + 1;
    const scratch = this.scratchPool.pop() ?? new Int32Array(batchSize * span);
    if (this.dataset.examples !== undefined) {
      try {
        if (this.packedRows !== undefined) await this.loadPacked(plan, into, scratch);
        else await this.loadExamples(plan, into, scratch);
      } finally {
        this.scratchPool.push(scratch);
      }
      return into;
    }
    try {
      await Promise.all(Array.from(plan.starts, (start, row) => this.dataset.read(start, span, scratch.subarray(row * span, (row + 1) * span))));
      for (let row = 0; row < batchSize; row++) {
        into.ids.set(scratch.subarray(row * span, row * span + seqLen), row * seqLen);
        into.targets.set(scratch.subarray(row * span + 1, row * span + span), row * seqLen);
      }
    } finally {
      this.scratchPool.push(scratch);
    }
    return into;
  }

  /** Each row: one example from its start, padded; targets kept where the loss mask trains them (else -1). */
  private async loadExamples(plan: BatchPlan, into: Batch, scratch: Int32Array): Promise<void> {
    const { batchSize, seqLen } = this;
    const { mask, starts } = this.dataset.examples!;
    const span = seqLen + 1;
    const lengths = Array.from(plan.starts, (start) => Math.min(exampleEnd(starts, start) - start, span));
    await Promise.all(Array.from(plan.starts, (start, row) => this.dataset.read(start, lengths[row], scratch.subarray(row * span, (row + 1) * span))));
    into.ids.fill(0);
    into.targets.fill(-1);
    for (let row = 0; row < batchSize; row++) {
      const start = plan.starts[row];
      const n = lengths[row];
      const base = row * seqLen;
      into.ids.set(scratch.subarray(row * span, row * span + n - 1), base);
      for (let j = 0; j + 1 < n; j++) if (mask[start + j + 1] & TRAINED) into.targets[base + j] = scratch[row * span + j + 1];
    }
  }

  /**
   * Each row: its examples one after another, each where it would start a row of its own moved
   * to where the one before ended, the row's end padding; docStarts says where each begins.
   */
  private async loadPacked(plan: BatchPlan, into: Batch, scratch: Int32Array): Promise<void> {
    const { batchSize, seqLen } = this;
    const rows = this.packedRows!;
    const { mask, starts } = this.dataset.examples!;
    const span = seqLen + 1;
    const docStarts = (into.docStarts ??= new Int32Array(batchSize * seqLen));
    into.ids.fill(0);
    into.targets.fill(-1);
    for (let row = 0; row < batchSize; row++) {
      const base = row * seqLen;
      const row0 = plan.starts[row];
      let at = 0;
      for (let e = rows[row0]; e < rows[row0 + 1]; e++) {
        const start = starts[this.firstExample + e];
        const n = Math.min(starts[this.firstExample + e + 1] - start, span);
        const tokens = scratch.subarray(0, n);
        await this.dataset.read(start, n, tokens);
        into.ids.set(tokens.subarray(0, n - 1), base + at);
        for (let j = 0; j + 1 < n; j++) if (mask[start + j + 1] & TRAINED) into.targets[base + at + j] = tokens[j + 1];
        docStarts.fill(at, base + at, base + at + n - 1);
        at += n - 1;
      }
      // The padding after the last example: a document of its own, which nothing trains.
      docStarts.fill(at, base + at, base + seqLen);
    }
  }

  /** Examples in the split, and the rows they are packed into (equal without packing). */
  get packing(): { examples: number; rows: number } | undefined {
    const rows = this.packedRows;
    return rows === undefined ? undefined : { examples: rows[rows.length - 1], rows: rows.length - 1 };
  }

  /** The next batch, read now. */
  next(into?: Batch): Promise<Batch> {
    return this.load(this.planNext(), into);
  }

  allocateBatch(): Batch {
    const n = this.batchSize * this.seqLen;
    return { ids: new Int32Array(n), targets: new Int32Array(n), ...(this.packedRows ? { docStarts: new Int32Array(n) } : {}) };
  }

  private cursorAt(position: number): SamplerCursor {
    return { epoch: Math.floor(position / this.windowCount), index: position % this.windowCount };
  }
}

/**
 * Consecutive examples [first, first + count) packed into rows of seqLen positions, in order:
 * an example of n tokens takes min(n, seqLen + 1) - 1 positions (its ids), and a row takes the
 * next example while it fits. Returns each row's first example relative to `first`, then `count`.
 */
function packExamples(starts: Float64Array, first: number, count: number, seqLen: number): Int32Array {
  const rowStarts: number[] = [];
  let used = seqLen; // no row open yet
  for (let e = 0; e < count; e++) {
    const takes = Math.min(starts[first + e + 1] - starts[first + e], seqLen + 1) - 1;
    if (used + takes > seqLen || rowStarts.length === 0) {
      rowStarts.push(e);
      used = 0;
    }
    used += takes;
  }
  rowStarts.push(count);
  return Int32Array.from(rowStarts);
}

/** The end of the example that starts at token `start` (binary search over the example starts). */
function exampleEnd(starts: Float64Array, start: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid] <= start) lo = mid + 1;
    else hi = mid;
  }
  return starts[lo];
}

function positiveInteger(value: number, key: string): void {
  if (!Number.isSafeInteger(value) || value <= 0) throw new ConfigError(`${key} must be a positive integer, got ${value}`, { where: key });
}
