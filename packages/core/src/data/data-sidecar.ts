import { readFile } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import { errorCode } from "../fs/errno-table.js";
import { fileReadError } from "../fs/file-errors.js";
import { writeFileAtomically } from "../fs/write-atomically.js";
import type { TokenFileFormat } from "./token-file-format.js";
import type { Tokenizer } from "./tokenizer.js";

/**
 * What a token file holds, stored beside it as `<file>.json`: training checks
 * the model against it, and checkpoints and `kiln sample` reuse its tokenizer.
 */
export interface DataSidecar {
  /** Tokenizer: a built-in name ("gpt2", "cl100k", "o200k", "bytes") or a folder tokenizer's identity (`<name>@sha256:<hash>`). */
  tokenizer: string;
  /** A folder tokenizer's folder (absolute), where training finds its files for checkpoints. */
  tokenizer_path?: string;
  vocab_size: number;
  tokens: number;
  /** Fraction of the tokens, at the end of the file, kept for validation. */
  val_fraction: number;
  /** The inputs the tokens came from, in order. */
  sources: string[];
  format: TokenFileFormat;
  /** An example file (chat, instruct or text rows): how many examples, each trained on its own row; its loss mask is `<file>.mask`. */
  examples?: number;
  /** Tokens the loss mask trains on. */
  trained_tokens?: number;
  /** The chat template (Jinja text) chat rows were rendered with, for checkpoints to carry. */
  chat_template?: string;
}

const SIDECAR = { what: "token file sidecar", error: DataError };
const FORMATS: readonly TokenFileFormat[] = ["u32", "llmc-u16", "llmc-u32"];

/** The sidecar of a u32 token file of `tokens` tokens that `tokenizer` wrote from `sources`. */
export function u32Sidecar(tokenizer: Tokenizer, tokens: number, info: { valFraction: number; sources: string[] }): DataSidecar {
  return {
    tokenizer: tokenizer.name,
    ...(tokenizer.location !== undefined ? { tokenizer_path: tokenizer.location } : {}),
    vocab_size: tokenizer.vocabSize,
    tokens,
    val_fraction: info.valFraction,
    sources: info.sources,
    format: "u32",
  };
}

/** `data/my.bin` -> `data/my.bin.json`. */
export function dataSidecarPath(binPath: string): string {
  return `${binPath}.json`;
}

/** Reads and checks the sidecar of a token file; undefined when there is none. */
export async function readDataSidecar(binPath: string): Promise<DataSidecar | undefined> {
  const file = dataSidecarPath(binPath);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if (errorCode(err) === "ENOENT") return undefined;
    throw fileReadError(err, file, SIDECAR);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new DataError(`sidecar is not valid JSON (${err instanceof Error ? err.message : String(err)})`, {
      where: file,
      hint: "Re-create it with `kiln prepare`, or delete it to use the token file without one.",
    });
  }
  return checkSidecar(value, file);
}

export async function writeDataSidecar(binPath: string, sidecar: DataSidecar): Promise<void> {
  await writeFileAtomically(dataSidecarPath(binPath), `${JSON.stringify(sidecar, null, 2)}\n`, SIDECAR);
}

function checkSidecar(value: unknown, file: string): DataSidecar {
  const fail = (key: string, want: string): never => {
    throw new DataError(`sidecar key "${key}" must be ${want}`, {
      where: `${file} (${key})`,
      hint: "Re-create it with `kiln prepare`, or delete it to use the token file without one.",
    });
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail("(top level)", "a JSON object");
  const v = value as Record<string, unknown>;
  if (typeof v.tokenizer !== "string" || v.tokenizer === "") fail("tokenizer", "a tokenizer name");
  if (v.tokenizer_path !== undefined && typeof v.tokenizer_path !== "string") fail("tokenizer_path", "a folder path");
  if (!isCount(v.vocab_size) || v.vocab_size === 0) fail("vocab_size", "a positive integer");
  if (!isCount(v.tokens)) fail("tokens", "a non-negative integer");
  if (typeof v.val_fraction !== "number" || !(v.val_fraction >= 0 && v.val_fraction < 1)) fail("val_fraction", "a number in [0, 1)");
  if (!Array.isArray(v.sources) || !v.sources.every((s) => typeof s === "string")) fail("sources", "an array of strings");
  if (!FORMATS.includes(v.format as TokenFileFormat)) fail("format", `one of ${FORMATS.join(", ")}`);
  if (v.examples !== undefined && (!isCount(v.examples) || v.examples === 0)) fail("examples", "a positive integer");
  if (v.trained_tokens !== undefined && !isCount(v.trained_tokens)) fail("trained_tokens", "a non-negative integer");
  if (v.chat_template !== undefined && typeof v.chat_template !== "string") fail("chat_template", "a string");
  return {
    tokenizer: v.tokenizer as string,
    ...(typeof v.tokenizer_path === "string" ? { tokenizer_path: v.tokenizer_path } : {}),
    vocab_size: v.vocab_size as number,
    tokens: v.tokens as number,
    val_fraction: v.val_fraction as number,
    sources: v.sources as string[],
    format: v.format as TokenFileFormat,
    ...(v.examples !== undefined ? { examples: v.examples as number } : {}),
    ...(v.trained_tokens !== undefined ? { trained_tokens: v.trained_tokens as number } : {}),
    ...(typeof v.chat_template === "string" ? { chat_template: v.chat_template } : {}),
  };
}

function isCount(x: unknown): x is number {
  return typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
}
