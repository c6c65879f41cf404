import { CheckpointError } from "@kiln/contract";
import { byteLevelBpeTables, byteSpelling } from "../data/bpe-rank-tables.js";
import { gpt2TokenizerFiles } from "../data/gpt2-tokenizer-files.js";
import type { Tokenizer } from "../data/tokenizer.js";
import { TOKENIZER_JSON } from "../data/tokenizer-files.js";
import type { GgufValue } from "./gguf-format.js";

/** llama.cpp's token types: a normal token, a control (special) token, an unused padding slot. */
const NORMAL = 1, CONTROL = 3, UNUSED = 5;

interface BpeJson {
  added_tokens?: { id: number; content: string; special?: boolean }[];
  pre_tokenizer?: PreTokenizerJson | null;
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[]; byte_fallback?: boolean };
}

interface PreTokenizerJson {
  type: string;
  use_regex?: boolean;
  add_prefix_space?: boolean;
  pattern?: { Regex?: string; String?: string };
  pretokenizers?: PreTokenizerJson[];
}

/**
 * The split patterns of byte-level BPE tokenizers and llama.cpp's name for each
 * (tokenizer.ggml.pre): Llama 3's (tiktoken's cl100k pattern) and Qwen2's (digits one by one).
 */
const SPLIT_PATTERNS: Record<string, string> = {
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "llama-bpe",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen2",
};

/** A tokenizer as GGUF's byte-level BPE ("gpt2") model holds it. */
interface BpeTables {
  tokens: string[];
  types: number[];
  merges: string[];
  /** llama.cpp's pre-tokenizer name. */
  pre: string;
}

const refuse = (where: string, what: string): never => {
  throw new CheckpointError(`kiln cannot write this checkpoint's tokenizer into a GGUF file: ${what}`, {
    where,
    hint: "export a Hugging Face folder instead (kiln export --format hf); GGUF takes the built-in tokenizers (gpt2, cl100k, o200k, bytes) and byte-level BPE tokenizer folders (GPT-2, Llama 3 or Qwen2 splitting)",
  });
};

/** llama.cpp's pre-tokenizer for a tokenizer.json's pre_tokenizer, refusing one it has none for. */
function preTokenizerName(pre: PreTokenizerJson | null | undefined, where: string): string {
  if (pre?.type === "ByteLevel" && pre.use_regex !== false && !pre.add_prefix_space) return "gpt-2";
  const [split, bytes] = pre?.type === "Sequence" ? (pre.pretokenizers ?? []) : [];
  const pattern = split?.type === "Split" ? split.pattern?.Regex : undefined;
  if (pattern !== undefined && bytes?.type === "ByteLevel" && bytes.use_regex === false && !bytes.add_prefix_space && pre?.pretokenizers?.length === 2) {
    const name = SPLIT_PATTERNS[pattern];
    if (name) return name;
    return refuse(where, `llama.cpp has no pre-tokenizer splitting with ${JSON.stringify(pattern)}`);
  }
  return refuse(where, `its pre_tokenizer (${JSON.stringify(pre ?? null).slice(0, 200)}) is not byte-level BPE splitting llama.cpp knows`);
}

function tablesOfJson(json: BpeJson, where: string): BpeTables {
  if (json.model?.type !== "BPE" || json.model.byte_fallback) refuse(where, `its model is ${json.model?.byte_fallback ? "BPE with byte fallback (SentencePiece-style)" : (json.model?.type ?? "unknown")}, not byte-level BPE`);
  const pre = preTokenizerName(json.pre_tokenizer, where);
  const tokens: string[] = [];
  const types: number[] = [];
  for (const [text, id] of Object.entries(json.model.vocab)) [tokens[id], types[id]] = [text, NORMAL];
  for (const t of json.added_tokens ?? []) [tokens[t.id], types[t.id]] = [t.content, t.special ? CONTROL : NORMAL];
  const merges = json.model.merges.map((m) => (typeof m === "string" ? m : m.join(" ")));
  return { tokens, types, merges, pre };
}

async function tablesOf(tokenizer: Tokenizer | undefined, where: string): Promise<BpeTables> {
  if (tokenizer?.name === "bytes") {
    // Each byte is a token spelled as byte-level BPE spells it; no merges, so every byte stays one token.
    return { tokens: byteSpelling(), types: new Array<number>(256).fill(NORMAL), merges: [], pre: "gpt-2" };
  }
  if (tokenizer?.name === "gpt2") return tablesOfJson(JSON.parse((await gpt2TokenizerFiles())[TOKENIZER_JSON]!) as BpeJson, where);
  if (tokenizer?.name === "cl100k" || tokenizer?.name === "o200k") {
    // tiktoken's encodings: cl100k splits text as Llama 3 does (it took cl100k's pattern), o200k as GPT-4o.
    // kiln's data holds no special token but the document separator <|endoftext|>; the other special ids stay unused.
    const { vocab, merges } = await byteLevelBpeTables(tokenizer.name);
    const tokens: string[] = [];
    for (const [text, id] of Object.entries(vocab)) tokens[id] = text;
    const types = tokens.map(() => NORMAL);
    if (tokenizer.endOfText !== undefined) [tokens[tokenizer.endOfText], types[tokenizer.endOfText]] = ["<|endoftext|>", CONTROL];
    return { tokens, types, merges, pre: tokenizer.name === "cl100k" ? "llama-bpe" : "gpt-4o" };
  }
  const json = tokenizer?.files?.[TOKENIZER_JSON];
  if (json !== undefined) return tablesOfJson(JSON.parse(json) as BpeJson, where);
  return refuse(where, "the checkpoint names no tokenizer kiln knows");
}

/**
 * The tokenizer.ggml.* keys for the tokenizer a run's data used, its vocabulary padded with
 * unused "[PAD<i>]" tokens up to the model's (llama.cpp's converter does the same): the
 * built-in gpt2 (pre-tokenizer "gpt-2"), cl100k ("llama-bpe"), o200k ("gpt-4o"), the bytes
 * tokenizer (the 256 bytes as tokens), or a byte-level BPE tokenizer folder. No BOS is added: kiln sample feeds the prompt's tokens alone.
 */
export async function ggufTokenizer(tokenizer: Tokenizer | undefined, vocabSize: number, where: string): Promise<[string, GgufValue][]> {
  const { tokens, types, merges, pre } = await tablesOf(tokenizer, where);
  if (tokens.length > vocabSize) {
    throw new CheckpointError(`the tokenizer has ${tokens.length} tokens, more than the model's ${vocabSize}`, { where, hint: "train with a vocab_size of at least the tokenizer's" });
  }
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] === undefined) [tokens[id], types[id]] = [`[PAD${id}]`, UNUSED];
  }
  const hf = tokenizer as { bos?: number; eos?: number } | undefined;
  const bos = hf?.bos ?? tokenizer?.endOfText, eos = hf?.eos ?? tokenizer?.endOfText;
  const id = (key: string, value: number | undefined): [string, GgufValue][] => (value === undefined ? [] : [[key, { type: "u32", value }]]);
  return [
    ["tokenizer.ggml.model", { type: "string", value: "gpt2" }],
    ["tokenizer.ggml.pre", { type: "string", value: pre }],
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", values: tokens }],
    ["tokenizer.ggml.token_type", { type: "array", itemType: "i32", values: types }],
    ["tokenizer.ggml.merges", { type: "array", itemType: "string", values: merges }],
    ...id("tokenizer.ggml.bos_token_id", bos),
    ...id("tokenizer.ggml.eos_token_id", eos),
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: false }],
  ];
}
