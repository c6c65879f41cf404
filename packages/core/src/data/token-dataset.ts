import { open, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { ConfigError, DataError } from "@kiln/contract";
import { type FileErrorContext, fileReadError } from "../fs/file-errors.js";
import { readDataSidecar, type DataSidecar } from "./data-sidecar.js";
import type { ExampleIndex } from "./examples/example-mask-bits.js";
import { readExampleIndex } from "./examples/example-mask.js";
import { findTokenAtOrAbove } from "./token-id-scan.js";
import { LLMC_HEADER_BYTES, detectTokenFileLayout, isLlmcShard, type TokenFileFormat, type TokenFileLayout } from "./token-file-format.js";
import { readTokensInto } from "./token-reader.js";
import { type U16Reading, readAsU16Tokens, u16ConversionCommand } from "./u16-token-file.js";

const TOKEN_FILE: FileErrorContext = { what: "token file", error: DataError, hints: { ENOENT: "Check the path, or create the file with `kiln prepare`." } };

/** A token file opened for reading windows of ids; never loaded whole. */
export interface TokenDataset {
  readonly path: string;
  readonly format: TokenFileFormat;
  readonly tokenCount: number;
  /** The file's `<path>.json` sidecar, when it has one. */
  readonly sidecar: DataSidecar | undefined;
  /** An example file's loss mask and example starts (its sidecar records examples); each example trains on its own row. */
  readonly examples?: ExampleIndex | undefined;
  /** Reads tokens [startToken, startToken + count) into `into[0 .. count)`. */
  read(startToken: number, count: number, into: Int32Array): Promise<void>;
  close(): Promise<void>;
}

export interface OpenTokenDatasetOptions {
  /** The model's vocabulary size: every id in the file must be below it. */
  vocabSize: number;
  /** Scan every id against vocabSize when opening (default true). */
  validate?: boolean;
}

/**
 * Opens a token file, detects its format (llm.c magic first, otherwise raw u32),
 * checks its size against its format and, unless told not to, streams through it
 * once to check every id is below `vocabSize`.
 */
export async function openTokenDataset(filePath: string, options: OpenTokenDatasetOptions): Promise<TokenDataset> {
  const { vocabSize, validate = true } = options;
  if (!Number.isSafeInteger(vocabSize) || vocabSize <= 0) {
    throw new ConfigError(`vocab_size must be a positive integer, got ${vocabSize}`, { where: "model.vocab_size" });
  }
  let file: FileHandle;
  try {
    file = await open(filePath, "r");
  } catch (err) {
    throw fileReadError(err, filePath, TOKEN_FILE);
  }
  try {
    const stat = await file.stat();
    if (stat.isDirectory()) throw fileReadError(Object.assign(new Error("is a directory"), { code: "EISDIR" }), filePath, TOKEN_FILE);
    const head = new Uint8Array(Math.min(stat.size, LLMC_HEADER_BYTES));
    if (head.byteLength > 0) await file.read(head, 0, head.byteLength, 0);
    if (stat.size % 4 !== 0 && !isLlmcShard(head)) {
      const u16 = await readAsU16Tokens(file, stat.size, filePath);
      if (u16 !== undefined) throw u16Error(filePath, u16, vocabSize, `its size, ${stat.size} bytes, is not a multiple of 4, so it is not a u32 token file`);
    }
    const layout = detectTokenFileLayout(head, stat.size, filePath);
    const sidecar = await readDataSidecar(filePath);
    if (sidecar !== undefined && sidecar.tokens !== layout.tokenCount) {
      throw new DataError(`${path.basename(filePath)} holds ${layout.tokenCount} tokens but its sidecar says ${sidecar.tokens}`, {
        where: filePath,
        hint: "The file changed after it was prepared; re-run kiln prepare to write both again.",
      });
    }
    if (validate) await checkTokenIds(file, layout, filePath, vocabSize, sidecar);
    const examples = sidecar?.examples !== undefined ? await readExampleIndex(filePath, layout.tokenCount, sidecar.examples) : undefined;
    return new FileTokenDataset(filePath, layout, sidecar, examples, file);
  } catch (err) {
    await file.close().catch(() => undefined);
    throw fileReadError(err, filePath, TOKEN_FILE);
  }
}

async function checkTokenIds(file: FileHandle, layout: TokenFileLayout, filePath: string, vocabSize: number, sidecar: DataSidecar | undefined): Promise<void> {
  const bad = await findTokenAtOrAbove(file, layout, filePath, vocabSize);
  if (bad === undefined) return;
  if (layout.format === "u32") {
    const u16 = await readAsU16Tokens(file, layout.tokenCount * 4, filePath);
    if (u16 !== undefined) {
      throw u16Error(filePath, u16, vocabSize, `read as 32-bit ids, id ${bad.value} at position ${bad.position} is not below the model's vocab_size ${vocabSize}`);
    }
  }
  const madeWith = sidecar === undefined ? "" : ` (it was prepared with the ${sidecar.tokenizer} tokenizer, vocab ${sidecar.vocab_size})`;
  throw new DataError(
    `token id ${bad.value} at position ${bad.position} is not below the model's vocab_size ${vocabSize}; the largest id in the file is ${bad.maxId}${madeWith}`,
    {
      where: filePath,
      hint: `re-run kiln prepare with the model's tokenizer or raise model.vocab_size (to at least ${bad.maxId + 1})`,
    },
  );
}

/** A raw file that holds 16-bit ids (nanoGPT's train.bin): named as such, with the command that converts it. */
function u16Error(filePath: string, u16: U16Reading, vocabSize: number, why: string): DataError {
  const above = u16.maxId >= vocabSize ? `; the model's vocab_size (${vocabSize}) must then be above ${u16.maxId}` : "";
  return new DataError(
    `${path.basename(filePath)}: this looks like 16-bit token ids (nanoGPT's format), not kiln's 32-bit ones: ${why}; read as 16-bit, it holds ${u16.tokens} ids, the largest ${u16.maxId}`,
    { where: filePath, hint: `Convert it to a u32 token file and train on that: ${u16ConversionCommand(filePath)}${above}` },
  );
}

class FileTokenDataset implements TokenDataset {
  readonly format: TokenFileFormat;
  readonly tokenCount: number;
  private closed = false;

  constructor(
    readonly path: string,
    private readonly layout: TokenFileLayout,
    readonly sidecar: DataSidecar | undefined,
    readonly examples: ExampleIndex | undefined,
    private readonly file: FileHandle,
  ) {
    this.format = layout.format;
    this.tokenCount = layout.tokenCount;
  }

  read(startToken: number, count: number, into: Int32Array): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`token dataset ${this.path} is closed`));
    return readTokensInto(this.file, this.layout, this.path, startToken, count, into);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.file.close();
  }
}
