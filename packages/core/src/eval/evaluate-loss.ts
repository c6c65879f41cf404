import type { Backend } from "@kiln/contract";
import type { TokenDataset } from "../data/token-dataset.js";
import type { PretrainedWeights } from "../hf/pretrained-weights.js";
import { ForwardRunner } from "../train/forward-runner.js";

/** What `kiln eval` reports: the mean next-token cross-entropy over the windows. */
export interface EvalResult {
  loss: number;
  perplexity: number;
  /** Targets scored: windows x seqLen. */
  tokens: number;
  windows: number;
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

/**
 * The mean next-token cross-entropy of `weights` over `data`'s windows (positions from 0 in
 * each window), summed in f64 over the forward passes' f32 sums. The weights run in f32.
 */
export async function evaluateLoss(backend: Backend, weights: PretrainedWeights, data: TokenDataset, options: EvalOptions): Promise<EvalResult> {
  const T = options.seqLen;
  const starts = windowStarts(data.tokenCount, T, options.maxWindows);
  const model = weights.model;
  const { layout, params } = await weights.upload(backend);
  try {
    const B = Math.max(1, Math.min(options.batchSize ?? 8, starts.length));
    const runner = new ForwardRunner(backend, model, layout, params, B, T);
    try {
      const ids = new Int32Array(B * T), targets = new Int32Array(B * T), window = new Int32Array(T + 1);
      let lossSum = 0, bytes = 0;
      for (let at = 0; at < starts.length; at += B) {
        ids.fill(0);
        targets.fill(-1); // rows past the last window score nothing
        for (let r = 0; r < B && at + r < starts.length; r++) {
          await data.read(starts[at + r], T + 1, window);
          ids.set(window.subarray(0, T), r * T);
          targets.set(window.subarray(1), r * T);
          if (options.bytesOf) bytes += options.bytesOf(window.subarray(1));
        }
        lossSum += await runner.run(ids, targets);
      }
      const tokens = starts.length * T;
      const loss = lossSum / tokens;
      return { loss, perplexity: Math.exp(loss), tokens, windows: starts.length, ...(options.bytesOf && bytes > 0 ? { bitsPerByte: lossSum / Math.LN2 / bytes } : {}) };
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
