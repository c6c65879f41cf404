import { CheckpointError } from "@kiln/contract";
import { gpt2TokenizerFiles } from "../data/gpt2-tokenizer-files.js";
import type { Tokenizer } from "../data/tokenizer.js";
import type { GgufValue } from "./gguf-format.js";

/** llama.cpp's token types: a normal token, a control (special) token, an unused padding slot. */
const NORMAL = 1, CONTROL = 3, UNUSED = 5;

interface BpeJson {
  added_tokens?: { id: number; content: string; special?: boolean }[];
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[] };
}

/**
 * The tokenizer.ggml.* keys for the tokenizer a run's data used, its vocabulary padded with
 * unused "[PAD<i>]" tokens up to the model's (llama.cpp's converter does the same). Today the
 * built-in gpt2 (byte-level BPE, pre-tokenizer "gpt-2"); others are refused by name.
 */
export async function ggufTokenizer(tokenizer: Tokenizer | undefined, vocabSize: number, where: string): Promise<[string, GgufValue][]> {
  if (tokenizer?.name !== "gpt2") {
    throw new CheckpointError(`kiln writes the gpt2 tokenizer into GGUF files so far; this checkpoint's data used ${tokenizer ? `"${tokenizer.name}"` : "no tokenizer kiln knows"}`, {
      where,
      hint: "export a Hugging Face folder instead (kiln export without --format gguf); GGUF for the other tokenizers is planned",
    });
  }
  const json = JSON.parse((await gpt2TokenizerFiles())["tokenizer.json"]!) as BpeJson;
  const tokens: string[] = [];
  const types: number[] = [];
  for (const [text, id] of Object.entries(json.model.vocab)) {
    tokens[id] = text;
    types[id] = NORMAL;
  }
  for (const t of json.added_tokens ?? []) {
    tokens[t.id] = t.content;
    types[t.id] = t.special ? CONTROL : NORMAL;
  }
  if (tokens.length > vocabSize) {
    throw new CheckpointError(`the tokenizer has ${tokens.length} tokens, more than the model's ${vocabSize}`, { where, hint: "train with a vocab_size of at least the tokenizer's" });
  }
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      types[id] = UNUSED;
    }
  }
  const merges = json.model.merges.map((m) => (typeof m === "string" ? m : m.join(" ")));
  const eos = tokenizer.endOfText;
  return [
    ["tokenizer.ggml.model", { type: "string", value: "gpt2" }],
    ["tokenizer.ggml.pre", { type: "string", value: "gpt-2" }],
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", values: tokens }],
    ["tokenizer.ggml.token_type", { type: "array", itemType: "i32", values: types }],
    ["tokenizer.ggml.merges", { type: "array", itemType: "string", values: merges }],
    ...(eos !== undefined
      ? ([
          ["tokenizer.ggml.bos_token_id", { type: "u32", value: eos }],
          ["tokenizer.ggml.eos_token_id", { type: "u32", value: eos }],
        ] as [string, GgufValue][])
      : []),
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: false }],
  ];
}
