import path from "node:path";
import { DataError } from "@kiln/contract";
import { Tokenizer as HfTokenizerModel } from "@huggingface/tokenizers";
import type { Tokenizer } from "./tokenizer.js";
import { TOKENIZER_JSON, type TokenizerFiles, tokenizerIdentity } from "./tokenizer-files.js";

/** A special token as tokenizer_config.json names it: the text, or an AddedToken object. */
type ConfigToken = string | { content?: unknown } | null | undefined;

/**
 * A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) run by
 * @huggingface/tokenizers, in process and offline. Text is encoded without the
 * post-processor's special tokens (documents get their separator from
 * TextTokenWriter); added tokens written in the text are matched, as transformers does.
 */
export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly endOfText: number | undefined;
  /** tokenizer_config.json's bos_token and eos_token, as ids (for config.json and generation_config.json). */
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  readonly prefixesText: boolean;

  private constructor(
    readonly name: string,
    readonly files: TokenizerFiles,
    private readonly model: HfTokenizerModel,
    readonly location: string | undefined,
    config: Record<string, unknown>,
    json: Record<string, unknown>,
  ) {
    let largest = -1;
    for (const id of model.get_vocab(true).values()) largest = Math.max(largest, id);
    this.vocabSize = largest + 1;
    this.bos = idOf(model, config.bos_token as ConfigToken);
    this.eos = idOf(model, config.eos_token as ConfigToken);
    this.prefixesText = addsPrefix(json);
    // Each document starts with BOS (Llama's <s>, GPT-2's <|endoftext|>), else EOS, else an added <|endoftext|>.
    this.endOfText = this.bos ?? this.eos ?? idOf(model, "<|endoftext|>");
  }

  /** The tokenizer `files` define; `name` is the folder's name, for its identity and messages; `location` the folder, where known. */
  static fromFiles(name: string, files: TokenizerFiles, location?: string): HfTokenizer {
    const where = path.join(location ?? name, TOKENIZER_JSON);
    const json = parseJson(files, TOKENIZER_JSON, where);
    if (json === undefined) throw new DataError(`${TOKENIZER_JSON} is missing`, { where: name, hint: "a Hugging Face tokenizer folder holds tokenizer.json" });
    const config = parseJson(files, "tokenizer_config.json", path.join(location ?? name, "tokenizer_config.json")) ?? {};
    let model: HfTokenizerModel;
    try {
      model = new HfTokenizerModel(json, config);
    } catch (err) {
      throw new DataError(`cannot build the tokenizer (${err instanceof Error ? err.message : String(err)})`, {
        where,
        hint: "kiln reads tokenizer.json files that transformers' fast tokenizers write (BPE, WordPiece, Unigram models)",
      });
    }
    return new HfTokenizer(tokenizerIdentity(name, files[TOKENIZER_JSON]!), files, model, location, config, json);
  }

  encode(text: string): number[] {
    return this.model.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: Iterable<number>): string {
    return this.model.decode(Array.from(ids), { skip_special_tokens: false });
  }
}

function parseJson(files: TokenizerFiles, name: keyof TokenizerFiles, where: string): Record<string, unknown> | undefined {
  const text = files[name];
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    throw new Error("not a JSON object");
  } catch (err) {
    throw new DataError(`${name} is not valid JSON (${err instanceof Error ? err.message : String(err)})`, { where, hint: "re-create the tokenizer folder with transformers' save_pretrained" });
  }
}

function idOf(model: HfTokenizerModel, token: ConfigToken): number | undefined {
  const content = typeof token === "string" ? token : typeof token?.content === "string" ? token.content : undefined;
  return content === undefined ? undefined : model.token_to_id(content);
}

/**
 * Whether tokenizer.json's normalizer or pre-tokenizer adds to the start of the
 * text: a Prepend normalizer (Llama 2's "▁"), Metaspace with a prepend scheme
 * other than "never", ByteLevel with add_prefix_space.
 */
function addsPrefix(json: Record<string, unknown>): boolean {
  const adds = (step: unknown): boolean => {
    if (typeof step !== "object" || step === null) return false;
    const s = step as Record<string, unknown>;
    if (Array.isArray(s.normalizers)) return s.normalizers.some(adds);
    if (Array.isArray(s.pretokenizers)) return s.pretokenizers.some(adds);
    if (s.type === "Prepend") return true;
    if (s.type === "Metaspace") return (s.prepend_scheme ?? (s.add_prefix_space === false ? "never" : "always")) !== "never";
    return s.type === "ByteLevel" && s.add_prefix_space === true;
  };
  return adds(json.normalizer) || adds(json.pre_tokenizer);
}
