import { ConfigError } from "@kiln/contract";
import type { TokenizerFiles } from "./tokenizer-files.js";

/** Text <-> token ids. */
export interface Tokenizer {
  /**
   * What the tokenizer is, as data sidecars and checkpoints record it: a built-in
   * name ("gpt2") or a folder's `<name>@sha256:<hash of tokenizer.json>` (tokenizerIdentity, tokenizer-files.ts).
   */
  readonly name: string;
  /** A folder tokenizer's files (tokenizer.json, ...), kept in checkpoints and exports; none for a built-in one. */
  readonly files?: TokenizerFiles;
  /** The folder a folder tokenizer was read from (absolute), recorded in data sidecars. */
  readonly location?: string;
  /**
   * True when the tokenizer adds something at the start of the text it encodes (a
   * prefix space, SentencePiece's ▁): text cut into pieces then gets other ids than
   * the whole, so TextTokenWriter cuts only where it must.
   */
  readonly prefixesText?: boolean;
  /** Ids run from 0 to vocabSize - 1; a model's vocab_size must be at least this. */
  readonly vocabSize: number;
  /** The id that separates documents (`<|endoftext|>`), where the tokenizer has one. */
  readonly endOfText: number | undefined;
  /** The id that ends a reply (a folder tokenizer's eos_token); endOfText where it has none. */
  readonly eos?: number | undefined;
  /** Encodes text as ordinary text: special-token strings in it are not special. */
  encode(text: string): number[];
  decode(ids: Iterable<number>): string;
}

export const TOKENIZER_NAMES = ["gpt2", "cl100k", "o200k", "bytes"] as const;
export type TokenizerName = (typeof TOKENIZER_NAMES)[number];

export function isTokenizerName(name: string): name is TokenizerName {
  return (TOKENIZER_NAMES as readonly string[]).includes(name);
}

interface BpeEncodingModule {
  encode(text: string, options?: { disallowedSpecial?: Set<string> }): number[];
  decode(ids: Iterable<number>): string;
}

interface BpeSpec {
  /** gpt-tokenizer's encoding module. */
  load: () => Promise<BpeEncodingModule>;
  /**
   * One past the largest id, as tiktoken's n_vocab. gpt-tokenizer's own
   * `vocabularySize` counts tokens instead (100264 for cl100k, 200006 for o200k),
   * which is less than the largest special id + 1 (cl100k's <|endofprompt|> is 100276).
   */
  vocabSize: number;
  endOfText: number;
}

const BPE_SPECS: Record<Exclude<TokenizerName, "bytes">, BpeSpec> = {
  gpt2: { load: () => import("gpt-tokenizer/encoding/r50k_base"), vocabSize: 50257, endOfText: 50256 },
  cl100k: { load: () => import("gpt-tokenizer/encoding/cl100k_base"), vocabSize: 100277, endOfText: 100257 },
  o200k: { load: () => import("gpt-tokenizer/encoding/o200k_base"), vocabSize: 200019, endOfText: 199999 },
};

const NO_SPECIAL_TOKENS = new Set<string>();

/** A byte-pair tokenizer from gpt-tokenizer: gpt2 (r50k_base), cl100k (cl100k_base), o200k (o200k_base). */
class BpeTokenizer implements Tokenizer {
  constructor(
    readonly name: TokenizerName,
    private readonly encoding: BpeEncodingModule,
    private readonly spec: BpeSpec,
  ) {}

  get vocabSize(): number {
    return this.spec.vocabSize;
  }

  get endOfText(): number {
    return this.spec.endOfText;
  }

  encode(text: string): number[] {
    return this.encoding.encode(text, { disallowedSpecial: NO_SPECIAL_TOKENS });
  }

  decode(ids: Iterable<number>): string {
    return this.encoding.decode(ids);
  }
}

/** Each UTF-8 byte is one token: vocabulary 256, no special tokens. */
class ByteTokenizer implements Tokenizer {
  readonly name = "bytes" as const;
  readonly vocabSize = 256;
  readonly endOfText = undefined;
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder("utf-8");

  encode(text: string): number[] {
    return Array.from(this.encoder.encode(text));
  }

  decode(ids: Iterable<number>): string {
    return this.decoder.decode(Uint8Array.from(ids));
  }
}

const loaded = new Map<TokenizerName, Promise<Tokenizer>>();

/** The tokenizer called `name`; its tables are loaded on first use and shared after. */
export function getTokenizer(name: string): Promise<Tokenizer> {
  if (!isTokenizerName(name)) {
    return Promise.reject(
      new ConfigError(`unknown tokenizer "${name}"`, { where: "tokenizer", hint: `Use one of: ${TOKENIZER_NAMES.join(", ")}.` }),
    );
  }
  let tokenizer = loaded.get(name);
  if (tokenizer === undefined) {
    tokenizer = name === "bytes" ? Promise.resolve(new ByteTokenizer()) : loadBpe(name);
    loaded.set(name, tokenizer);
  }
  return tokenizer;
}

async function loadBpe(name: Exclude<TokenizerName, "bytes">): Promise<Tokenizer> {
  const spec = BPE_SPECS[name];
  return new BpeTokenizer(name, await spec.load(), spec);
}
