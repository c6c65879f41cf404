// The bits of an example file's loss mask, and its index in memory (no file I/O here: browser bundles import it).

/**
 * The loss mask of an example file, `<tokens>.bin.mask`: one byte per token of
 * the token file, in the same order. Bit 0 (TRAINED) set: the token counts in
 * the loss, as the target predicted from the tokens before it. Bit 1
 * (EXAMPLE_START) set: the token is the first of an example (one conversation,
 * one prompt and completion, one text). The other bits are zero; the first byte
 * starts an example. Examples never share a training row.
 */
export const TRAINED = 1;
export const EXAMPLE_START = 2;

/** An example file's mask, held in memory, and where each example begins. */
export interface ExampleIndex {
  /** One byte per token (TRAINED, EXAMPLE_START). */
  readonly mask: Uint8Array;
  /** First token of each example, then the token count: example i is [starts[i], starts[i + 1]). */
  readonly starts: Float64Array;
  readonly count: number;
}

