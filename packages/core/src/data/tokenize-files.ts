import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import { type FileErrorContext, fileReadError } from "../fs/file-errors.js";
import type { DataSidecar } from "./data-sidecar.js";
import { TextTokenWriter } from "./text-token-writer.js";
import type { Tokenizer } from "./tokenizer.js";
import { DEFAULT_VAL_FRACTION } from "./token-split.js";

export interface TokenizeProgress {
  bytesRead: number;
  bytesTotal: number;
  tokens: number;
  /** The file being read. */
  file: string;
}

export interface TokenizeFilesOptions {
  /** Text files, each one document, in order. */
  files: readonly string[];
  /** The u32 token file to write; its sidecar goes to `<output>.json`. */
  output: string;
  tokenizer: Tokenizer;
  /** Recorded in the sidecar for training to split off (default 0.01). */
  valFraction?: number;
  onProgress?: (progress: TokenizeProgress) => void;
  /** Aborting stops at the next chunk and leaves nothing at the output path. */
  signal?: AbortSignal;
}

const READ_CHUNK_BYTES = 1 << 20;
const INPUT_FILE: FileErrorContext = { what: "input file", error: DataError };

/**
 * Tokenizes UTF-8 text files into a u32 token file with its sidecar, streaming:
 * memory stays bounded whatever the input size, and the output appears only
 * when complete (a failure or an abort leaves no partial file).
 */
export async function tokenizeFiles(options: TokenizeFilesOptions): Promise<DataSidecar> {
  const { files, output, tokenizer, valFraction = DEFAULT_VAL_FRACTION, onProgress, signal } = options;
  if (files.length === 0) throw new DataError("no input files were given", { hint: "Name one or more text files or directories." });
  if (!(valFraction >= 0 && valFraction < 1)) {
    throw new DataError(`validation fraction must be in [0, 1), got ${valFraction}`, { where: "--val", hint: "Use a value such as 0.01, or 0 for none." });
  }
  const sizes = await Promise.all(files.map((file) => inputSize(file)));
  const bytesTotal = sizes.reduce((a, b) => a + b, 0);
  signal?.throwIfAborted();

  const writer = await TextTokenWriter.create(output, tokenizer);
  let bytesRead = 0;
  try {
    for (const file of files) {
      const decoder = new TextDecoder("utf-8");
      const stream = createReadStream(file, { highWaterMark: READ_CHUNK_BYTES });
      try {
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          signal?.throwIfAborted();
          await writer.write(decoder.decode(chunk, { stream: true }));
          bytesRead += chunk.byteLength;
          onProgress?.({ bytesRead, bytesTotal, tokens: writer.tokenCount, file });
        }
      } catch (err) {
        stream.destroy();
        throw signal?.aborted ? err : fileReadError(err, file, INPUT_FILE);
      }
      await writer.write(decoder.decode());
      await writer.endDocument();
      onProgress?.({ bytesRead, bytesTotal, tokens: writer.tokenCount, file });
    }
    signal?.throwIfAborted();
  } catch (err) {
    await writer.abort();
    throw err;
  }
  return writer.commit({ valFraction, sources: [...files] });
}

async function inputSize(file: string): Promise<number> {
  try {
    const s = await stat(file);
    if (s.isDirectory()) throw Object.assign(new Error("is a directory"), { code: "EISDIR" });
    return s.size;
  } catch (err) {
    throw fileReadError(err, file, INPUT_FILE);
  }
}
