import path from "node:path";
import { fileURLToPath } from "node:url";

/** A Hugging Face tokenizer folder: byte-level BPE as GPT-2's (256 byte tokens, 20 merges), <|endoftext|> = 276 as BOS and EOS. */
export const TINY_TOKENIZER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "tiny-bpe-tokenizer");
