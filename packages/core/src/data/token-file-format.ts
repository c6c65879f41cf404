import path from "node:path";
import { DataError } from "@kiln/contract";

/**
 * Token file formats kiln reads:
 * - `u32`: raw little-endian u32 token ids, no header (Oxidizr's format; what `kiln prepare` writes).
 * - `llmc-u16`: an llm.c / nanoGPT shard: 256 little-endian int32 header words
 *   [magic 20240520, version 1, token count, 0...] then u16 token ids (GPT-2 data).
 * - `llmc-u32`: llm.c's u32 shard: header [magic 20240801, version 7, token count, 0...]
 *   then u32 token ids (llm.c writes these for Llama 3 data).
 */
export type TokenFileFormat = "u32" | "llmc-u16" | "llmc-u32";

export interface TokenFileLayout {
  format: TokenFileFormat;
  /** Bytes before the first token. */
  headerBytes: number;
  /** Bytes per token id: 2 or 4. */
  tokenBytes: 2 | 4;
  tokenCount: number;
}

export const LLMC_HEADER_WORDS = 256;
export const LLMC_HEADER_BYTES = LLMC_HEADER_WORDS * 4;
export const LLMC_U16_MAGIC = 20240520;
export const LLMC_U16_VERSION = 1;
export const LLMC_U32_MAGIC = 20240801;
export const LLMC_U32_VERSION = 7;

interface ShardKind {
  format: TokenFileFormat;
  magic: number;
  version: number;
  tokenBytes: 2 | 4;
}

const SHARD_KINDS: readonly ShardKind[] = [
  { format: "llmc-u16", magic: LLMC_U16_MAGIC, version: LLMC_U16_VERSION, tokenBytes: 2 },
  { format: "llmc-u32", magic: LLMC_U32_MAGIC, version: LLMC_U32_VERSION, tokenBytes: 4 },
];

const REMAKE_HINT = "The file is truncated or was not written as token data; re-create it with `kiln prepare` (or the tool that wrote it).";

/** Whether `head`, a file's first bytes, starts with an llm.c shard's magic number. */
export function isLlmcShard(head: Uint8Array): boolean {
  if (head.byteLength < 4) return false;
  const first = new DataView(head.buffer, head.byteOffset, 4).getInt32(0, true);
  return SHARD_KINDS.some((k) => k.magic === first);
}

/**
 * Works out a token file's format from its first bytes and its size, and checks
 * that the size fits: an llm.c magic number first, otherwise raw u32.
 * `head` holds the file's first min(size, 1024) bytes.
 */
export function detectTokenFileLayout(head: Uint8Array, fileSize: number, filePath: string): TokenFileLayout {
  const name = path.basename(filePath);
  if (fileSize === 0) {
    throw new DataError(`${name} is empty: a token file needs at least one token`, {
      where: filePath,
      hint: "Prepare it again from non-empty text with `kiln prepare`.",
    });
  }
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const first = head.byteLength >= 4 ? view.getInt32(0, true) : undefined;
  const shard = SHARD_KINDS.find((k) => k.magic === first);
  if (shard !== undefined) return shardLayout(shard, view, fileSize, filePath, name);

  if (fileSize % 4 !== 0) {
    throw new DataError(`${name}: data size ${fileSize} is not a multiple of 4 bytes: not a u32 token file`, {
      where: filePath,
      hint: `A headerless token file holds little-endian u32 ids, 4 bytes each. ${REMAKE_HINT}`,
    });
  }
  return { format: "u32", headerBytes: 0, tokenBytes: 4, tokenCount: fileSize / 4 };
}

function shardLayout(kind: ShardKind, view: DataView, fileSize: number, filePath: string, name: string): TokenFileLayout {
  if (fileSize < LLMC_HEADER_BYTES) {
    throw new DataError(`${name} starts with the llm.c magic ${kind.magic} but ends at byte ${fileSize}, inside its ${LLMC_HEADER_BYTES}-byte header`, {
      where: filePath,
      hint: REMAKE_HINT,
    });
  }
  const version = view.getInt32(4, true);
  if (version !== kind.version) {
    const known = SHARD_KINDS.map((k) => `magic ${k.magic} with version ${k.version} (u${k.tokenBytes * 8} tokens)`).join(", ");
    throw new DataError(`${name} is an llm.c shard (magic ${kind.magic}) of version ${version}, which kiln does not read`, {
      where: filePath,
      hint: `kiln reads ${known}. Re-create the shard in one of these, or as a u32 .bin with \`kiln prepare\`.`,
    });
  }
  const headerCount = view.getInt32(8, true);
  const dataBytes = fileSize - LLMC_HEADER_BYTES;
  if (dataBytes % kind.tokenBytes !== 0) {
    throw new DataError(`${name}: data size ${dataBytes} after the header is not a multiple of ${kind.tokenBytes} bytes: not a u${kind.tokenBytes * 8} token shard`, {
      where: filePath,
      hint: REMAKE_HINT,
    });
  }
  const tokenCount = dataBytes / kind.tokenBytes;
  if (headerCount !== tokenCount) {
    throw new DataError(
      `${name}: header says ${headerCount} tokens (${headerCount * kind.tokenBytes} bytes) but the file holds ${dataBytes} bytes of tokens (${tokenCount} tokens)`,
      { where: filePath, hint: REMAKE_HINT },
    );
  }
  if (tokenCount === 0) {
    throw new DataError(`${name} is an llm.c shard with no tokens`, { where: filePath, hint: "Prepare it again from non-empty text." });
  }
  return { format: kind.format, headerBytes: LLMC_HEADER_BYTES, tokenBytes: kind.tokenBytes, tokenCount };
}

/** The 1024-byte header of an llm.c shard holding `tokenCount` tokens of `tokenBytes` bytes each. */
export function encodeLlmcHeader(tokenCount: number, tokenBytes: 2 | 4 = 2): Uint8Array {
  const kind = SHARD_KINDS.find((k) => k.tokenBytes === tokenBytes)!;
  const header = new Int32Array(LLMC_HEADER_WORDS);
  header[0] = kind.magic;
  header[1] = kind.version;
  header[2] = tokenCount;
  const bytes = new Uint8Array(LLMC_HEADER_BYTES);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < LLMC_HEADER_WORDS; i++) view.setInt32(i * 4, header[i], true);
  return bytes;
}
