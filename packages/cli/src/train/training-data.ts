import path from "node:path";
import { BatchSampler, type TokenDataset, builtinCorpus, openTokenDataset } from "@kiln/core";
import type { RunSettings } from "@kiln/core";
import { kilnCacheDir } from "../cache-dir.js";

export interface TrainingData {
  dataset: TokenDataset;
  train: BatchSampler;
  val: BatchSampler;
  /** The token file (the built-in corpus's cached file when no data path is set). */
  file: string;
  /** Tokenizer from the data's sidecar (or the built-in corpus): a built-in name or a folder tokenizer's identity. */
  tokenizer: string | undefined;
  /** A folder tokenizer's folder, as the sidecar records it. */
  tokenizerPath: string | undefined;
  /** The chat template the data's chat rows were rendered with (its sidecar's). */
  chatTemplate: string | undefined;
  /** One line for the banner. */
  description: string;
}

/**
 * Opens (and validates) the token file, or the built-in corpus when none is given.
 * Data parallel: the samplers hand this rank its slice of every global batch.
 */
export async function openTrainingData(s: RunSettings, ranks: { rank: number; worldSize: number } = { rank: 0, worldSize: 1 }): Promise<TrainingData> {
  let file = s.dataPath;
  let description: string;
  if (file === undefined) {
    const tokenizer = (s.tokenizer ?? "bytes") as "bytes";
    const corpus = await builtinCorpus({ cacheDir: path.join(kilnCacheDir(), "corpus"), tokenizer });
    file = corpus.path;
    description = `built-in story corpus, ${tokenizer} tokens (${corpus.created ? "tokenized now" : "cached"} at ${corpus.path})`;
  } else {
    description = file;
  }
  const dataset = await openTokenDataset(file, { vocabSize: s.model.vocabSize });
  // The split the data's sidecar records, unless a flag asks for another (the banner then says so).
  const recorded = dataset.sidecar?.val_fraction;
  const flag = s.overridden.get("data.val_fraction");
  const valFraction = flag || recorded === undefined ? s.valFraction : recorded;
  const split = flag && recorded !== undefined && recorded !== s.valFraction ? `; validation share ${s.valFraction} from ${flag.from} over the data's recorded ${recorded}` : "";
  const common = { batchSize: s.batchSize, seqLen: s.seqLen, seed: s.seed, valFraction, ...ranks };
  // trainer.pack: example files only (a token file's rows are windows of one stream).
  const pack = s.pack && dataset.examples !== undefined;
  const train = new BatchSampler(dataset, { ...common, split: "train", pack });
  const val = new BatchSampler(dataset, { ...common, split: "val", shuffle: false, pack });
  return {
    dataset,
    train,
    val,
    file,
    tokenizer: dataset.sidecar?.tokenizer ?? (s.dataPath === undefined ? (s.tokenizer ?? "bytes") : s.tokenizer),
    tokenizerPath: dataset.sidecar?.tokenizer_path,
    chatTemplate: dataset.sidecar?.chat_template,
    description: `${description}: ${dataset.tokenCount.toLocaleString("en-US")} tokens (${dataset.format}), ${dataset.examples !== undefined ? exampleRows(dataset, train, val) : `${train.windowCount} training windows`}${split}`,
  };
}

/** How an example file trains: its examples, one a row padded or packed into rows, and how many rows cut. */
function exampleRows(dataset: TokenDataset, train: BatchSampler, val: BatchSampler): string {
  const cut = train.examplesCut() + val.examplesCut();
  const trained = dataset.sidecar?.trained_tokens;
  const packed = train.packing;
  const rows = packed
    ? `${packed.examples.toLocaleString("en-US")} for training packed into ${packed.rows.toLocaleString("en-US")} rows of seq_len ${train.seqLen} (--pack: attention and positions kept inside each example by the kernels' document starts)`
    : `${train.windowCount.toLocaleString("en-US")} for training, one a row, padded to seq_len ${train.seqLen} (attention never crosses examples; --pack fills rows)`;
  return (
    `${dataset.examples!.count.toLocaleString("en-US")} examples (${rows})${trained !== undefined ? `; loss on ${trained.toLocaleString("en-US")} masked-in tokens` : ""}` +
    `${cut > 0 ? `; ${cut} longer than ${train.seqLen + 1} tokens cut` : ""}`
  );
}
