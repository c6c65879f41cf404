import { type Backend, DataError } from "@kiln/contract";
import { TRAINED } from "../data/examples/example-mask-bits.js";
import type { TokenDataset } from "../data/token-dataset.js";
import type { PretrainedWeights } from "../hf/pretrained-weights.js";
import { ForwardRunner } from "../train/forward-runner.js";

/** What `kiln eval` reports: the mean next-token cross-entropy over the windows. */
export interface EvalResult {
  loss: number;
  perplexity: number;
  /** Targets scored: windows x seqLen, or an example file's trained targets. */
  tokens: number;
  /** Windows scored, or an example file's examples (one a window). */
  windows: number;
  /** True for an example file: each window is one example, scored where its loss mask trains. */
  examples?: boolean;
  /** Bits per byte of the targets' text, where the data's tokenizer is known. */
  bitsPerByte?: number;
}

export interface EvalOptions {
  seqLen: number;
  /** At most this many windows, the first ones. */
  maxWindows?: number;
  /** Windows per forward pass; default 8 (fewer when there are fewer). */
  batchSize?: number;
  /** Bytes of text a window's targets stand for (bytesOfTokens), for bits per byte; none when the tokenizer is unknown. */
  bytesOf?: (targets: Int32Array) => number;
}

/**
 * Starts of the windows over `tokenCount` tokens: 0, T, 2T, … while a window's inputs
 * ids[s, s + T) and targets ids[s + 1, s + T + 1) fit (s + T + 1 <= tokenCount).
 */
export function windowStarts(tokenCount: number, seqLen: number, maxWindows = Infinity): number[] {
  const out: number[] = [];
  for (let s = 0; s + seqLen + 1 <= tokenCount && out.length < maxWindows; s += seqLen) out.push(s);
  return out;
}

/** The windows of `data`: one an example for an example file (its length, at most T + 1 tokens), else windowStarts' grid. */
function windowsOf(data: TokenDataset, T: number, maxWindows = Infinity): { starts: number[]; lengths: number[] } {
  const examples = data.examples;
  if (examples === undefined) {
    const starts = windowStarts(data.tokenCount, T, maxWindows);
    return { starts, lengths: starts.map(() => T + 1) };
  }
  const n = Math.min(examples.count, maxWindows);
  const starts = Array.from(examples.starts.subarray(0, n));
  return { starts, lengths: starts.map((s, i) => Math.min(examples.starts[i + 1] - s, T + 1)) };
}

/**
 * The mean next-token cross-entropy of `weights` over `data`'s windows (positions from 0 in
 * each window), summed in f64 over the forward passes' f32 sums. The weights run in f32.
 * An example file is scored one example a window (cut to T + 1 tokens), over the targets
 * its loss mask trains, as training's loss is.
 */
export async function evaluateLoss(backend: Backend, weights: PretrainedWeights, data: TokenDataset, options: EvalOptions): Promise<EvalResult> {
  const T = options.seqLen;
  const { starts, lengths } = windowsOf(data, T, options.maxWindows);
  const mask = data.examples?.mask;
  const model = weights.model;
  const { layout, params } = await weights.upload(backend);
  try {
    const B = Math.max(1, Math.min(options.batchSize ?? 8, starts.length));
    const runner = new ForwardRunner(backend, model, layout, params, B, T);
    try {
      const ids = new Int32Array(B * T), targets = new Int32Array(B * T), window = new Int32Array(T + 1);
      let lossSum = 0, bytes = 0, tokens = 0;
      for (let at = 0; at < starts.length; at += B) {
        ids.fill(0);
        targets.fill(-1); // rows past the last window, and padding after an example, score nothing
        for (let r = 0; r < B && at + r < starts.length; r++) {
          const start = starts[at + r], n = lengths[at + r];
          await data.read(start, n, window);
          ids.set(window.subarray(0, n - 1), r * T);
          const scored = mask === undefined ? window.subarray(1, n) : window.subarray(1, n).filter((_, j) => (mask[start + j + 1] & TRAINED) !== 0);
          if (mask === undefined) targets.set(scored, r * T);
          else for (let j = 0; j + 1 < n; j++) if (mask[start + j + 1] & TRAINED) targets[r * T + j] = window[j + 1];
          tokens += scored.length;
          if (options.bytesOf) bytes += options.bytesOf(scored);
        }
        lossSum += await runner.run(ids, targets);
      }
      if (tokens === 0) {
        throw new DataError(`no example of ${data.path} has a trained target within its first ${T + 1} tokens: there is nothing to score`, { where: data.path, hint: "Pass a longer --seq-len, or prepare the examples again." });
      }
      const loss = lossSum / tokens;
      return {
        loss,
        perplexity: Math.exp(loss),
        tokens,
        windows: starts.length,
        ...(mask !== undefined ? { examples: true } : {}),
        ...(options.bytesOf && bytes > 0 ? { bitsPerByte: lossSum / Math.LN2 / bytes } : {}),
      };
    } finally {
      runner.dispose();
    }
  } finally {
    backend.free(params);
  }
}

/** Bytes of text `ids` decode to: one a token for the bytes tokenizer, else the UTF-8 length of the decoded text. */
export function bytesOfTokens(tokenizer: { decode(ids: Iterable<number>): string }, name: string): (ids: Int32Array) => number {
  if (name === "bytes") return (ids) => ids.length;
  const utf8 = new TextEncoder();
  return (ids) => utf8.encode(tokenizer.decode(ids)).byteLength;
}
