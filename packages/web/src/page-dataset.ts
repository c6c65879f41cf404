import { type TokenDataset, type Tokenizer } from "@kiln/core/browser";

/**
 * Documents as one token stream, as kiln prepare and the CLI's built-in corpus write it:
 * each document that has text starts with the tokenizer's <|endoftext|> id (when it has one).
 */
export function tokenizeDocuments(documents: Iterable<string>, tokenizer: Tokenizer): Uint32Array {
  const chunks: number[][] = [];
  let total = 0;
  for (const doc of documents) {
    const ids = tokenizer.encode(doc);
    if (ids.length === 0) continue;
    if (tokenizer.endOfText !== undefined) {
      chunks.push([tokenizer.endOfText]);
      total++;
    }
    chunks.push(ids);
    total += ids.length;
  }
  const out = new Uint32Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Tokens held in memory as a TokenDataset (what the batch samplers read), named `path` in messages. */
export function memoryDataset(path: string, tokens: Uint32Array): TokenDataset {
  return {
    path,
    format: "u32",
    tokenCount: tokens.length,
    sidecar: undefined,
    async read(startToken, count, into) {
      for (let i = 0; i < count; i++) into[i] = tokens[startToken + i];
    },
    async close() {},
  };
}
