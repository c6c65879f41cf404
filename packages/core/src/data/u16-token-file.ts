import { createReadStream } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { open } from "node:fs/promises";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { type FileErrorContext, fileReadError } from "../fs/file-errors.js";
import { type DataSidecar, u32Sidecar, writeDataSidecar } from "./data-sidecar.js";
import { LLMC_HEADER_BYTES, isLlmcShard, type TokenFileLayout } from "./token-file-format.js";
import { TokenFileWriter } from "./token-file-writer.js";
import type { Tokenizer } from "./tokenizer.js";
import { readTokensInto } from "./token-reader.js";

// nanoGPT's prepare.py writes its train.bin and val.bin as raw little-endian uint16 ids
// with no header (np.memmap(..., dtype=np.uint16)). Read as kiln's raw u32, two ids
// become one: id a then b reads as a + 65536 * b, far above any vocabulary.

/** A headerless file read as 16-bit ids. */
export interface U16Reading {
  tokens: number;
  maxId: number;
}

const CHUNK_IDS = 1 << 20;
/** Above this, a u32 id's upper 16 bits are more than a vocabulary of 2^18 (Gemma's 262,144) needs. */
const SMALL_UPPER_HALF = 3;
const U16_FILE: FileErrorContext = { what: "16-bit token file", error: DataError };

/**
 * Whether a headerless token file of `fileSize` bytes looks like 16-bit ids: its size is
 * even, and in most of its 4-byte words the upper 16 bits (the next id, for 16-bit data)
 * are more than a real u32 id's could be. Streams through the file once; returns what
 * it holds read as 16-bit, or undefined.
 */
export async function readAsU16Tokens(file: FileHandle, fileSize: number, filePath: string): Promise<U16Reading | undefined> {
  if (fileSize < 4 || fileSize % 2 !== 0) return undefined;
  const layout: TokenFileLayout = { format: "llmc-u16", headerBytes: 0, tokenBytes: 2, tokenCount: fileSize / 2 };
  const chunk = new Int32Array(Math.min(CHUNK_IDS, layout.tokenCount));
  let maxId = 0;
  let words = 0;
  let largeUpper = 0;
  for (let start = 0; start < layout.tokenCount; start += chunk.length) {
    const count = Math.min(chunk.length, layout.tokenCount - start);
    await readTokensInto(file, layout, filePath, start, count, chunk);
    for (let i = 0; i < count; i++) {
      const id = chunk[i];
      if (id > maxId) maxId = id;
      // CHUNK_IDS is even, so an odd index within a chunk is an odd index in the file: an upper half.
      if (i % 2 === 1) {
        words++;
        if (id > SMALL_UPPER_HALF) largeUpper++;
      }
    }
  }
  return largeUpper * 2 > words ? { tokens: layout.tokenCount, maxId } : undefined;
}

/** The output a conversion of `input` would be given by default: `train.bin` -> `train-u32.bin`. */
export function u32PathFor(input: string): string {
  const ext = path.extname(input);
  return `${ext === "" ? input : input.slice(0, -ext.length)}-u32${ext === "" ? ".bin" : ext}`;
}

/** The command that converts a 16-bit token file, for hints. */
export function u16ConversionCommand(input: string): string {
  return `kiln prepare --from-u16 ${input} -o ${u32PathFor(input)}`;
}

export interface ConvertU16Options {
  /** A headerless file of little-endian uint16 token ids (nanoGPT's train.bin). */
  input: string;
  /** The u32 token file to write; its sidecar goes to `<output>.json`. */
  output: string;
  /** The tokenizer the ids are of: the sidecar records it, and every id must be below its vocabulary. */
  tokenizer: Tokenizer;
  valFraction: number;
  /** Called (and awaited) once the input was checked, before the output is created. */
  onStart?: () => void | Promise<void>;
  signal?: AbortSignal;
}

/**
 * Widens a file of 16-bit token ids into kiln's u32 token file and its sidecar,
 * streaming; both appear only when complete (a failure or an abort leaves nothing).
 */
export async function convertU16TokenFile(options: ConvertU16Options): Promise<DataSidecar> {
  const { input, output, tokenizer, valFraction, onStart, signal } = options;
  await checkU16Input(input);
  await onStart?.();
  const writer = await TokenFileWriter.create(output);
  try {
    let carry: number | undefined;
    let position = 0;
    const ids: number[] = [];
    const stream = createReadStream(input, { highWaterMark: 1 << 20 });
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        signal?.throwIfAborted();
        ids.length = 0;
        let i = 0;
        if (carry !== undefined && chunk.length > 0) {
          ids.push(carry | (chunk[0] << 8));
          carry = undefined;
          i = 1;
        }
        for (; i + 1 < chunk.length; i += 2) ids.push(chunk[i] | (chunk[i + 1] << 8));
        if (i < chunk.length) carry = chunk[i];
        for (const [k, id] of ids.entries()) {
          if (id >= tokenizer.vocabSize) {
            throw new DataError(`token id ${id} at position ${position + k} is not below the ${tokenizer.name} tokenizer's vocabulary of ${tokenizer.vocabSize}`, {
              where: input,
              hint: "Name the tokenizer the ids were made with (--tokenizer); nanoGPT's GPT-2 data is gpt2's.",
            });
          }
        }
        await writer.append(ids);
        position += ids.length;
      }
    } catch (err) {
      stream.destroy();
      throw fileReadError(err, input, U16_FILE);
    }
    signal?.throwIfAborted();
    const sidecar = u32Sidecar(tokenizer, writer.tokenCount, { valFraction, sources: [input] });
    await writer.commit();
    await writeDataSidecar(output, sidecar);
    return sidecar;
  } catch (err) {
    await writer.abort();
    throw err;
  }
}

/** Refuses what is not a headerless file of 16-bit ids: empty, an odd size, an llm.c shard, u32 ids. */
async function checkU16Input(input: string): Promise<void> {
  const name = path.basename(input);
  let size: number;
  const head = new Uint8Array(LLMC_HEADER_BYTES);
  let length: number;
  let looksU16 = true;
  try {
    const file = await open(input, "r");
    try {
      const st = await file.stat();
      if (st.isDirectory()) throw Object.assign(new Error("is a directory"), { code: "EISDIR" });
      size = st.size;
      ({ bytesRead: length } = await file.read(head, 0, head.byteLength, 0));
      if (size >= 4 && size % 2 === 0 && !isLlmcShard(head.subarray(0, length))) looksU16 = (await readAsU16Tokens(file, size, input)) !== undefined;
    } finally {
      await file.close();
    }
  } catch (err) {
    throw fileReadError(err, input, U16_FILE);
  }
  if (size === 0) throw new DataError(`${name} is empty: there are no token ids to convert`, { where: input, hint: "Name the file of 16-bit ids (nanoGPT's train.bin)." });
  if (size % 2 !== 0) {
    throw new DataError(`${name}: size ${size} is odd, so it is not a file of 16-bit token ids (2 bytes each)`, {
      where: input,
      hint: "The file is truncated or is not token data; write it again with the tool that made it.",
    });
  }
  if (isLlmcShard(head.subarray(0, length))) {
    throw new DataError(`${name} is an llm.c token shard (it has llm.c's header), which kiln reads as it is`, {
      where: input,
      hint: `Train on it directly: kiln train -d ${input}`,
    });
  }
  if (!looksU16) {
    throw new DataError(`${name} does not look like 16-bit token ids: read as 32-bit words, most have an upper half of 0 to ${SMALL_UPPER_HALF}, as kiln's u32 token files do`, {
      where: input,
      hint: `If it is a u32 token file, train on it as it is (kiln train -d ${input}); if it is not token data, prepare its text with kiln prepare -i.`,
    });
  }
}
