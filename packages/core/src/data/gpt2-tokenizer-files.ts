import type { TokenizerFiles } from "./tokenizer-files.js";

const END_OF_TEXT = "<|endoftext|>";
const END_OF_TEXT_ID = 50256;

/**
 * GPT-2's tokenizer as transformers saves it (tokenizer.json for GPT2TokenizerFast,
 * tokenizer_config.json, special_tokens_map.json), built from the r50k_base ranks
 * kiln's built-in gpt2 tokenizer (gpt-tokenizer) encodes with, so an exported
 * folder carries the tokenizer its model was trained with. Vocabulary entries are
 * GPT-2's byte-to-character spelling of each token; merges are found by running
 * byte-pair merging on each token with the ranks below its own (the last merge
 * that makes it). Built once (about a second), then shared.
 */
export function gpt2TokenizerFiles(): Promise<TokenizerFiles> {
  built ??= buildGpt2TokenizerFiles();
  return built;
}

let built: Promise<TokenizerFiles> | undefined;

async function buildGpt2TokenizerFiles(): Promise<TokenizerFiles> {
  const ranks = ((await import("gpt-tokenizer/bpeRanks/r50k_base")) as { default: (string | number[])[] }).default;
  const encoder = new TextEncoder();
  const tokens = ranks.map((t) => (typeof t === "string" ? encoder.encode(t) : Uint8Array.from(t)));
  const rankOf = new Map(tokens.map((bytes, rank) => [keyOf(bytes), rank]));
  const spell = byteSpelling();
  const spelled = (bytes: Uint8Array) => Array.from(bytes, (b) => spell[b]).join("");
  const vocab: Record<string, number> = {};
  tokens.forEach((bytes, id) => (vocab[spelled(bytes)] = id));
  const merges = tokens.slice(256).map((bytes, i) => lastMerge(bytes, 256 + i, rankOf).map(spelled).join(" "));
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

function keyOf(bytes: Uint8Array): string {
  return String.fromCharCode(...bytes);
}

/** The two tokens whose merge makes `bytes` (rank `rank`): byte-pair merging with the lower ranks only, down to two parts. */
function lastMerge(bytes: Uint8Array, rank: number, rankOf: Map<string, number>): [Uint8Array, Uint8Array] {
  let parts = Array.from(bytes, (b) => Uint8Array.of(b));
  while (parts.length > 2) {
    let best = -1;
    let bestRank = rank;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = rankOf.get(keyOf(parts[i]) + keyOf(parts[i + 1]));
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) throw new Error(`r50k_base token ${rank} is not made by merging lower-ranked tokens`);
    const merged = new Uint8Array(parts[best].length + parts[best + 1].length);
    merged.set(parts[best]);
    merged.set(parts[best + 1], parts[best].length);
    parts = [...parts.slice(0, best), merged, ...parts.slice(best + 2)];
  }
  return [parts[0], parts[1]];
}

/** GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for characters from U+0100 on. */
export function byteSpelling(): string[] {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let next = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCharCode(printable(b) ? b : 256 + next++);
  return out;
}
