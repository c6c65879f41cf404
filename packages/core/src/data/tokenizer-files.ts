import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { errorCode } from "../fs/errno-table.js";
import { fileReadError } from "../fs/file-errors.js";

/** The file that defines a Hugging Face tokenizer (vocabulary, merges, normalizer, pre-tokenizer, decoder). */
export const TOKENIZER_JSON = "tokenizer.json";

/** The files of a Hugging Face tokenizer kiln reads, keeps in checkpoints and exports; tokenizer.json is required. */
export const TOKENIZER_FILE_NAMES = [TOKENIZER_JSON, "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"] as const;

/** A tokenizer's files by name, as text. */
export type TokenizerFiles = Partial<Record<(typeof TOKENIZER_FILE_NAMES)[number], string>>;

/**
 * A folder tokenizer's identity: the folder's name for people and the first 16 hex
 * digits of tokenizer.json's SHA-256 for comparing (sameTokenizer).
 */
export function tokenizerIdentity(name: string, tokenizerJson: string): string {
  return `${name}@sha256:${createHash("sha256").update(tokenizerJson).digest("hex").slice(0, 16)}`;
}

/**
 * The tokenizer.json hash of built-in tokenizers that kiln export writes as one
 * (gpt2-tokenizer-files.ts): a folder holding it is that built-in tokenizer.
 */
export const BUILTIN_TOKENIZER_JSON_HASHES: Readonly<Record<string, string>> = { gpt2: "318ae481810cf9d9" };

/**
 * Whether data tokenized with `a` suits a model trained with `b`: the same built-in
 * name, or folder tokenizers with the same tokenizer.json (whatever their folders
 * are called), kiln's own gpt2 tokenizer.json included.
 */
export function sameTokenizer(a: string, b: string): boolean {
  const hashOf = (id: string) => /@sha256:([0-9a-f]+)$/.exec(id)?.[1] ?? BUILTIN_TOKENIZER_JSON_HASHES[id];
  const [ha, hb] = [hashOf(a), hashOf(b)];
  return ha !== undefined && hb !== undefined ? ha === hb : a === b;
}

/**
 * The tokenizer files in `location` (a folder holding tokenizer.json, or the
 * tokenizer.json itself), with the name its identity uses (the folder's name) and the folder.
 * Undefined when a folder has no tokenizer.json and `required` is false.
 */
export async function readTokenizerFiles(location: string, required = true): Promise<{ name: string; dir: string; files: TokenizerFiles } | undefined> {
  const isDir = await stat(location).then(
    (s) => s.isDirectory(),
    (err) => {
      throw fileReadError(err, location, { what: "tokenizer", error: DataError });
    },
  );
  const dir = isDir ? location : path.dirname(location);
  const files: TokenizerFiles = {};
  for (const name of TOKENIZER_FILE_NAMES) {
    const file = name === TOKENIZER_JSON && !isDir ? location : path.join(dir, name);
    try {
      files[name] = await readFile(file, "utf8");
    } catch (err) {
      if (errorCode(err) !== "ENOENT") throw fileReadError(err, file, { what: "tokenizer file", error: DataError });
      if (name !== TOKENIZER_JSON) continue;
      if (!required) return undefined;
      throw new DataError(`the folder has no ${TOKENIZER_JSON}`, {
        where: dir,
        hint: "pass a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json) or a built-in tokenizer: gpt2, cl100k, o200k, bytes",
      });
    }
  }
  return { name: path.basename(path.resolve(dir)), dir: path.resolve(dir), files };
}
