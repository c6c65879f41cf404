/** gpt-tokenizer's rank tables: the bytes of each token by rank (a string where the bytes are UTF-8 text). */
type Ranks = (string | number[])[];

const RANKS: Record<"gpt2" | "cl100k" | "o200k", () => Promise<{ default: Ranks }>> = {
  gpt2: () => import("gpt-tokenizer/bpeRanks/r50k_base") as Promise<{ default: Ranks }>,
  cl100k: () => import("gpt-tokenizer/bpeRanks/cl100k_base") as Promise<{ default: Ranks }>,
  o200k: () => import("gpt-tokenizer/bpeRanks/o200k_base") as Promise<{ default: Ranks }>,
};

/** A byte-level BPE tokenizer's tables as Hugging Face and GGUF files hold them. */
export interface ByteLevelBpeTables {
  /** Each token's byte-level spelling (byteSpelling) by id. */
  vocab: Record<string, number>;
  /** "left right" spellings, in rank order. */
  merges: string[];
}

/**
 * The vocabulary and merges of one of gpt-tokenizer's rank tables. Vocabulary entries are
 * GPT-2's byte-to-character spelling of each token; the merges are found by running
 * byte-pair merging on each token with the ranks below its own (the last merge that makes
 * it), in rank order, so merging with them rebuilds the ranked encoding.
 */
export async function byteLevelBpeTables(name: keyof typeof RANKS): Promise<ByteLevelBpeTables> {
  const ranks = (await RANKS[name]()).default;
  const encoder = new TextEncoder();
  const tokens = ranks.map((t) => (typeof t === "string" ? encoder.encode(t) : Uint8Array.from(t)));
  const rankOf = new Map(tokens.map((bytes, rank) => [keyOf(bytes), rank]));
  const spell = byteSpelling();
  const spelled = (bytes: Uint8Array) => Array.from(bytes, (b) => spell[b]).join("");
  const vocab: Record<string, number> = {};
  tokens.forEach((bytes, id) => (vocab[spelled(bytes)] = id));
  const merges = tokens.slice(256).map((bytes, i) => lastMerge(bytes, 256 + i, rankOf, name).map(spelled).join(" "));
  return { vocab, merges };
}

function keyOf(bytes: Uint8Array): string {
  return String.fromCharCode(...bytes);
}

/** The two tokens whose merge makes `bytes` (rank `rank`): byte-pair merging with the lower ranks only, down to two parts. */
function lastMerge(bytes: Uint8Array, rank: number, rankOf: Map<string, number>, name: string): [Uint8Array, Uint8Array] {
  let parts = Array.from(bytes, (b) => Uint8Array.of(b));
  while (parts.length > 2) {
    let best = -1;
    let bestRank = rank;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = rankOf.get(keyOf(parts[i]) + keyOf(parts[i + 1]));
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) throw new Error(`${name} token ${rank} is not made by merging lower-ranked tokens`);
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
