import type { FileHandle } from "node:fs/promises";
import type { TokenFileLayout } from "./token-file-format.js";
import { readTokensInto } from "./token-reader.js";

export interface OutOfRangeToken {
  /** Index of the first token id >= the limit. */
  position: number;
  value: number;
  /** Largest id in the whole file. */
  maxId: number;
}

const DEFAULT_CHUNK_TOKENS = 1 << 20;

/**
 * Streams through a token file in fixed-size chunks (one reused buffer, never
 * the whole file) and returns the first id >= `limit`, or undefined if all are below.
 */
export async function findTokenAtOrAbove(
  file: FileHandle,
  layout: TokenFileLayout,
  filePath: string,
  limit: number,
  chunkTokens = DEFAULT_CHUNK_TOKENS,
): Promise<OutOfRangeToken | undefined> {
  const chunk = new Int32Array(Math.min(chunkTokens, layout.tokenCount));
  let found: { position: number; value: number } | undefined;
  let maxId = 0;
  for (let start = 0; start < layout.tokenCount; start += chunk.length) {
    const count = Math.min(chunk.length, layout.tokenCount - start);
    await readTokensInto(file, layout, filePath, start, count, chunk);
    if (found === undefined) {
      for (let i = 0; i < count; i++) {
        // u32 ids >= 2^31 read back as negative int32s
        if ((chunk[i] >>> 0) >= limit) {
          found = { position: start + i, value: chunk[i] >>> 0 };
          break;
        }
      }
    }
    // Once something is out of range, finish the pass only to report the largest id.
    if (found !== undefined) {
      for (let i = 0; i < count; i++) if ((chunk[i] >>> 0) > maxId) maxId = chunk[i] >>> 0;
    }
  }
  return found === undefined ? undefined : { ...found, maxId };
}
