import { STORY_GRAMMAR_VERSION } from "./stories/story-generator.js";

// The built-in corpus's defaults and name, apart from its file cache (builtin-corpus.ts), for browser bundles too.

export const DEFAULT_BUILTIN_CORPUS_CHARS = 3_000_000;

/** How the sidecar names the built-in corpus. */
export function builtinCorpusSource(seed: number, chars: number): string {
  return `builtin:stories-v${STORY_GRAMMAR_VERSION}?seed=${seed}&chars=${chars}`;
}
