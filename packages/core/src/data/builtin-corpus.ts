import { mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_BUILTIN_CORPUS_CHARS, builtinCorpusSource } from "./builtin-corpus-source.js";
import { dataSidecarPath, readDataSidecar, type DataSidecar } from "./data-sidecar.js";
import { STORY_GRAMMAR_VERSION, generateStories } from "./stories/story-generator.js";
import { TextTokenWriter } from "./text-token-writer.js";
import { getTokenizer, type Tokenizer, type TokenizerName } from "./tokenizer.js";
import { DEFAULT_VAL_FRACTION } from "./token-split.js";

export { DEFAULT_BUILTIN_CORPUS_CHARS, builtinCorpusSource };

export interface BuiltinCorpusOptions {
  /** Where the tokenized corpus is kept between runs. */
  cacheDir: string;
  tokenizer: Tokenizer | TokenizerName;
  /** Picks the stories (default 1). */
  seed?: number;
  /** Characters of text to generate, about the same in bytes (default 3,000,000). */
  chars?: number;
}

export interface BuiltinCorpus {
  /** The u32 token file. */
  path: string;
  sidecarPath: string;
  sidecar: DataSidecar;
  /** Whether this call generated and tokenized it (false: it was in the cache). */
  created: boolean;
}

/**
 * kiln's own training text: short children's stories from a hand-written
 * grammar (generated, so free to ship), tokenized on first use into
 * `cacheDir` and reused after. The same options give the same tokens.
 */
export async function builtinCorpus(options: BuiltinCorpusOptions): Promise<BuiltinCorpus> {
  const { cacheDir, seed = 1, chars = DEFAULT_BUILTIN_CORPUS_CHARS } = options;
  const tokenizer = typeof options.tokenizer === "string" ? await getTokenizer(options.tokenizer) : options.tokenizer;
  const source = builtinCorpusSource(seed, chars);
  const file = path.join(cacheDir, `stories-v${STORY_GRAMMAR_VERSION}-seed${seed}-${chars}-${tokenizer.name}.bin`);

  const cached = await readCached(file, source);
  if (cached !== undefined) return { path: file, sidecarPath: dataSidecarPath(file), sidecar: cached, created: false };

  await mkdir(cacheDir, { recursive: true });
  const writer = await TextTokenWriter.create(file, tokenizer);
  try {
    for (const story of generateStories(seed, chars)) {
      await writer.write(story);
      await writer.endDocument();
    }
  } catch (err) {
    await writer.abort();
    throw err;
  }
  const sidecar = await writer.commit({ valFraction: DEFAULT_VAL_FRACTION, sources: [source] });
  return { path: file, sidecarPath: dataSidecarPath(file), sidecar, created: true };
}

async function readCached(file: string, source: string): Promise<DataSidecar | undefined> {
  try {
    const sidecar = await readDataSidecar(file);
    if (sidecar === undefined || sidecar.sources[0] !== source) return undefined;
    const { size } = await stat(file);
    return size === sidecar.tokens * 4 ? sidecar : undefined;
  } catch {
    return undefined; // anything wrong with the cache: make it again
  }
}
