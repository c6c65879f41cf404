import { DataError } from "@kiln/contract";

export type DataSplit = "train" | "val";

/** Token ranges of the two splits: train is [0, trainTokens), val is the rest, at the end of the stream. */
export interface TokenSplit {
  trainTokens: number;
  valTokens: number;
}

export const DEFAULT_VAL_FRACTION = 0.01;

/** How many non-overlapping (seqLen + 1)-token windows, with starts seqLen apart, fit in `tokens`. */
export function windowsIn(tokens: number, seqLen: number): number {
  return tokens >= seqLen + 1 ? Math.floor((tokens - 1) / seqLen) : 0;
}

/**
 * Splits a token stream: validation gets the last `valFraction` of it, rounded
 * up to at least one (seqLen + 1)-token window, as long as training keeps at
 * least one window too; data too small for both gets no validation part.
 */
export function splitTokens(tokenCount: number, seqLen: number, valFraction: number, where: string): TokenSplit {
  if (!(valFraction >= 0 && valFraction < 1)) {
    throw new DataError(`validation fraction must be in [0, 1), got ${valFraction}`, { where, hint: "Use a value such as 0.01 (1%), or 0 for no validation split." });
  }
  const window = seqLen + 1;
  if (tokenCount < window) {
    throw new DataError(`the data holds ${tokenCount} tokens, too few for even one training sequence of ${seqLen} tokens plus its next-token target (${window} tokens)`, {
      where,
      hint: `Add more text, or lower seq_len below ${Math.max(1, tokenCount - 1)}.`,
    });
  }
  if (valFraction === 0) return { trainTokens: tokenCount, valTokens: 0 };
  let valTokens = Math.max(Math.ceil(tokenCount * valFraction), window);
  valTokens = Math.min(valTokens, tokenCount - window);
  if (valTokens < window) valTokens = 0;
  return { trainTokens: tokenCount - valTokens, valTokens };
}
