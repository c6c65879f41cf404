import { philox4x32, toUnitOpen } from "../rng/philox.js";

export interface SamplingOptions {
  /** Divides the logits; 0 means greedy (argmax). */
  temperature: number;
  /** Keep only the k most likely tokens (0 = all). */
  topK: number;
  seed: number;
}

const words = new Uint32Array(4);

/**
 * Draws a token id from one row of logits: temperature, top-k, softmax, then
 * inverse-CDF sampling with the uniform of Philox counter `draw` under `seed`.
 */
export function sampleToken(logits: Float32Array, options: SamplingOptions, draw: number): number {
  const n = logits.length;
  if (options.temperature <= 0) {
    let best = 0;
    for (let i = 1; i < n; i++) if (logits[i] > logits[best]) best = i;
    return best;
  }
  let order = Array.from({ length: n }, (_, i) => i);
  if (options.topK > 0 && options.topK < n) order = order.sort((a, b) => logits[b] - logits[a]).slice(0, options.topK);
  let max = -Infinity;
  for (const i of order) max = Math.max(max, logits[i]);
  const weights = order.map((i) => Math.exp((logits[i] - max) / options.temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  const u = toUnitOpen(philox4x32(draw, 0, 0, 0, options.seed, 0x73616d70, words)[0]) * total; // key word: "samp"
  let acc = 0;
  for (let j = 0; j < order.length; j++) {
    acc += weights[j];
    if (u <= acc) return order[j];
  }
  return order[order.length - 1];
}
