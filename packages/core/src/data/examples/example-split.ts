import { DataError } from "@kiln/contract";

/** Examples of the two splits: train is the first trainExamples, val the rest. */
export interface ExampleSplit {
  trainExamples: number;
  valExamples: number;
}

/**
 * Splits an example file: validation gets the last `valFraction` of the
 * examples, rounded up to at least one, as long as training keeps one; a file
 * of one example gets no validation part.
 */
export function splitExamples(count: number, valFraction: number, where: string): ExampleSplit {
  if (!(valFraction >= 0 && valFraction < 1)) {
    throw new DataError(`validation fraction must be in [0, 1), got ${valFraction}`, { where, hint: "Use a value such as 0.01 (1%), or 0 for no validation split." });
  }
  const valExamples = valFraction === 0 ? 0 : Math.min(Math.max(Math.ceil(count * valFraction), 1), count - 1);
  return { trainExamples: count - valExamples, valExamples };
}
