import { byteLevelBpeTables } from "./bpe-rank-tables.js";
import type { TokenizerFiles } from "./tokenizer-files.js";

const END_OF_TEXT = "<|endoftext|>";
const END_OF_TEXT_ID = 50256;

/**
 * GPT-2's tokenizer as transformers saves it (tokenizer.json for GPT2TokenizerFast,
 * tokenizer_config.json, special_tokens_map.json), built from the r50k_base ranks
 * kiln's built-in gpt2 tokenizer (gpt-tokenizer) encodes with, so an exported
 * folder carries the tokenizer its model was trained with (vocabulary and merges
 * from bpe-rank-tables.ts). Built once (about a second), then shared.
 */
export function gpt2TokenizerFiles(): Promise<TokenizerFiles> {
  built ??= buildGpt2TokenizerFiles();
  return built;
}

let built: Promise<TokenizerFiles> | undefined;

async function buildGpt2TokenizerFiles(): Promise<TokenizerFiles> {
  const { vocab, merges } = await byteLevelBpeTables("gpt2");
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: END_OF_TEXT_ID, content: END_OF_TEXT, single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
  };
  const special = { bos_token: END_OF_TEXT, eos_token: END_OF_TEXT, unk_token: END_OF_TEXT };
  const config = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: { [END_OF_TEXT_ID]: { content: END_OF_TEXT, lstrip: false, normalized: true, rstrip: false, single_word: false, special: true } },
    ...special,
    clean_up_tokenization_spaces: false,
    tokenizer_class: "GPT2Tokenizer",
  };
  const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
  return { "tokenizer.json": json(tokenizer), "tokenizer_config.json": json(config), "special_tokens_map.json": json(special) };
}
