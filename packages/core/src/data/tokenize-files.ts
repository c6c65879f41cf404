import { stat } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import { type FileErrorContext, fileReadError } from "../fs/file-errors.js";
import type { DataSidecar } from "./data-sidecar.js";
import { TextCheck } from "./text-check.js";
import { TextInputFile } from "./text-input-file.js";
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

/** An input left out because it is not text. */
export interface SkippedInput {
  file: string;
  /** What it is, as a noun phrase: "a PNG image", "a gzip-compressed file holding binary data (...)". */
  reason: string;
}

export interface TokenizeFilesOptions {
  /** Text files, each one document, in order: UTF-8, plain or compressed with gzip, zstd or xz. */
  files: readonly string[];
  /** The u32 token file to write; its sidecar goes to `<output>.json`. */
  output: string;
  tokenizer: Tokenizer;
  /** Recorded in the sidecar for training to split off (default 0.01). */
  valFraction?: number;
  /**
   * Called for each input that is not text (binary data, or not UTF-8), which is then
   * left out. Without it, such an input is refused: a DataError names it and what it is.
   */
  onNotText?: (skipped: SkippedInput) => void;
  /**
   * Called (and awaited) once the inputs were looked at, before the output is created:
   * the files to be read and their size on disk.
   */
  onStart?: (start: { files: readonly string[]; bytesTotal: number }) => void | Promise<void>;
  onProgress?: (progress: TokenizeProgress) => void;
  /** Aborting stops at the next chunk and leaves nothing at the output path. */
  signal?: AbortSignal;
}

const INPUT_FILE: FileErrorContext = { what: "input file", error: DataError };

/**
 * Tokenizes UTF-8 text files into a u32 token file with its sidecar, streaming:
 * memory stays bounded whatever the input size, and the output appears only
 * when complete (a failure or an abort leaves no partial file). Compressed
 * inputs are read through. An input that is not text is found by its first
 * bytes and its first 64 KiB before anything is written, or while it is read
 * (its tokens are then taken back); it is skipped (onNotText) or refused.
 * The sidecar's sources are the files used.
 */
export async function tokenizeFiles(options: TokenizeFilesOptions): Promise<DataSidecar> {
  const { files, output, tokenizer, valFraction = DEFAULT_VAL_FRACTION, onNotText, onStart, onProgress, signal } = options;
  if (files.length === 0) throw new DataError("no input files were given", { hint: "Name one or more text files or directories." });
  if (!(valFraction >= 0 && valFraction < 1)) {
    throw new DataError(`validation fraction must be in [0, 1), got ${valFraction}`, { where: "--val", hint: "Use a value such as 0.01, or 0 for none." });
  }
  const notText = (file: string, reason: string): void => {
    if (onNotText === undefined) {
      throw new DataError(`input file is not text: ${reason}`, {
        where: file,
        hint: "Leave it out of the input (move it out of the folder, or name the text files), or convert it to UTF-8 text.",
      });
    }
    onNotText({ file, reason });
  };

  const inputs: TextInputFile[] = [];
  for (const file of files) {
    await inputSize(file);
    const input = await TextInputFile.open(file);
    const problem = await input.notText();
    signal?.throwIfAborted();
    if (problem === undefined) inputs.push(input);
    else notText(file, problem);
  }
  const sizes = await Promise.all(inputs.map((input) => inputSize(input.file)));
  const bytesTotal = sizes.reduce((a, b) => a + b, 0);
  signal?.throwIfAborted();
  await onStart?.({ files: inputs.map((input) => input.file), bytesTotal });

  const writer = await TextTokenWriter.create(output, tokenizer);
  const used: string[] = [];
  let bytesDone = 0;
  try {
    for (const [i, input] of inputs.entries()) {
      const { file } = input;
      const decoder = new TextDecoder("utf-8");
      const check = new TextCheck();
      let problem: string | undefined;
      for await (const chunk of input.chunks()) {
        signal?.throwIfAborted();
        const text = decoder.decode(chunk, { stream: true });
        check.see(text);
        problem = check.problem(false);
        if (problem !== undefined) break;
        await writer.write(text);
        onProgress?.({ bytesRead: bytesDone + Math.min(input.rawBytesRead, sizes[i]), bytesTotal, tokens: writer.tokenCount, file });
      }
      if (problem === undefined) {
        const rest = decoder.decode();
        check.see(rest);
        problem = check.problem(true);
        if (problem === undefined) await writer.write(rest);
      }
      bytesDone += sizes[i];
      if (problem !== undefined) {
        await writer.discardDocument();
        notText(file, input.compression === undefined ? problem : `a ${input.compression}-compressed file holding ${problem}`);
      } else {
        await writer.endDocument();
        used.push(file);
      }
      onProgress?.({ bytesRead: bytesDone, bytesTotal, tokens: writer.tokenCount, file });
    }
    signal?.throwIfAborted();
    if (used.length === 0) {
      throw new DataError(`no input file is text (${files.length} skipped): nothing to tokenize`, {
        where: files.length <= 3 ? files.join(", ") : `${files.slice(0, 3).join(", ")}, ...`,
        hint: "Give UTF-8 text files (plain, or compressed with gzip, zstd or xz).",
      });
    }
  } catch (err) {
    await writer.abort();
    throw err;
  }
  return writer.commit({ valFraction, sources: used });
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
