import { existsSync } from "node:fs";
import { CheckpointError, ConfigError } from "@kiln/contract";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import { META_TOKENIZER, META_TOKENIZER_FILES } from "../checkpoint/checkpoint-keys.js";
import { HfTokenizer } from "./hf-tokenizer.js";
import { TOKENIZER_NAMES, type Tokenizer, getTokenizer, isTokenizerName } from "./tokenizer.js";
import { type TokenizerFiles, readTokenizerFiles } from "./tokenizer-files.js";

/**
 * The tokenizer `spec` names: a built-in one (gpt2, cl100k, o200k, bytes), a
 * Hugging Face tokenizer folder (or its tokenizer.json file), or the one a kiln
 * checkpoint (.safetensors) records.
 */
export async function openTokenizer(spec: string): Promise<Tokenizer> {
  if (isTokenizerName(spec)) return getTokenizer(spec);
  if (spec.endsWith(".safetensors")) return tokenizerOfCheckpointFile(spec);
  if (!existsSync(spec)) {
    throw new ConfigError(`unknown tokenizer "${spec}": not a built-in tokenizer, and no such file or folder`, {
      where: "--tokenizer",
      hint: `use one of ${TOKENIZER_NAMES.join(", ")}, the path of a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json), or a kiln checkpoint`,
    });
  }
  const { name, dir, files } = (await readTokenizerFiles(spec))!;
  return HfTokenizer.fromFiles(name, files, dir);
}

/**
 * The tokenizer a checkpoint records: its identity (META_TOKENIZER) and, for a folder
 * tokenizer, the files it keeps (META_TOKENIZER_FILES). `where` names the checkpoint.
 */
export async function tokenizerOfCheckpoint(identity: string, filesJson: string | undefined, where: string): Promise<Tokenizer> {
  if (isTokenizerName(identity)) return getTokenizer(identity);
  if (filesJson === undefined) {
    throw new CheckpointError(`the checkpoint names tokenizer "${identity}" but does not hold its files`, {
      where,
      hint: "pass --tokenizer with the folder holding that tokenizer.json",
    });
  }
  const tokenizer = HfTokenizer.fromFiles(identity.replace(/@sha256:[0-9a-f]+$/, ""), JSON.parse(filesJson) as TokenizerFiles);
  if (tokenizer.name !== identity) {
    throw new CheckpointError(`the tokenizer files the checkpoint holds are ${tokenizer.name}, not the ${identity} it names`, { where, hint: "the checkpoint is damaged; pass --tokenizer with the tokenizer folder" });
  }
  return tokenizer;
}

async function tokenizerOfCheckpointFile(file: string): Promise<Tokenizer> {
  const reader = await openSafetensors(file);
  const meta = reader.metadata;
  await reader.close();
  if (meta[META_TOKENIZER] === undefined) {
    throw new CheckpointError("the checkpoint does not say which tokenizer its data used", { where: file, hint: `name the tokenizer instead: ${TOKENIZER_NAMES.join(", ")} or a tokenizer folder` });
  }
  return tokenizerOfCheckpoint(meta[META_TOKENIZER], meta[META_TOKENIZER_FILES], file);
}
