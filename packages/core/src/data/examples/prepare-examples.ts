import { DataError } from "@kiln/contract";
import type { DataSidecar } from "../data-sidecar.js";
import type { Tokenizer } from "../tokenizer.js";
import { DEFAULT_VAL_FRACTION } from "../token-split.js";
import { ChatTemplate } from "./chat-template.js";
import { type TokenSegment, ExampleFileWriter } from "./example-file-writer.js";
import { type ExampleFormat, detectFormat, exampleText } from "./example-formats.js";
import { readExampleRows } from "./example-rows.js";

export const LONG_EXAMPLE_POLICIES = ["truncate", "drop"] as const;
export type LongExamplePolicy = (typeof LONG_EXAMPLE_POLICIES)[number];

export interface PrepareExamplesOptions {
  /** JSON Lines, JSON or Parquet files of rows, in order. */
  files: readonly string[];
  output: string;
  tokenizer: Tokenizer;
  /** The rows' shape; detected from each file's first row when not given. */
  format?: ExampleFormat;
  /** Overrides the tokenizer's chat template for chat rows. */
  chatTemplate?: ChatTemplate;
  /** Training's sequence length: an example of more than seqLen + 1 tokens is cut to that, or dropped. */
  seqLen?: number;
  longExamples?: LongExamplePolicy;
  valFraction?: number;
  onStart?: () => void | Promise<void>;
  onProgress?: (p: { rows: number; tokens: number; file: string }) => void;
  signal?: AbortSignal;
}

export interface PreparedExamples {
  sidecar: DataSidecar;
  /** The format of each file, in order. */
  formats: ExampleFormat[];
  rows: number;
  /** Examples cut to seqLen + 1 tokens. */
  truncated: number;
  /** Examples left out: longer than seqLen + 1 with the drop policy, or with nothing left to train after the cut. */
  dropped: number;
}

/**
 * Tokenizes rows of chat, instruct or text examples into an example file: the
 * u32 tokens, the loss mask beside them (what is trained, where each example
 * begins) and the sidecar. Chat rows are rendered with the tokenizer's chat
 * template (or `chatTemplate`); instruct and text rows start with the
 * tokenizer's document separator, and a completion ends with its end token
 * (trained, so the model learns to stop). An assistant turn is trained up to
 * and including its first end token (the tokenizer's eos); what the template
 * writes after it (a newline) is not the reply. Each part is tokenized on its own.
 */
export async function prepareExamples(options: PrepareExamplesOptions): Promise<PreparedExamples> {
  const { files, output, tokenizer, seqLen, longExamples = "truncate", valFraction = DEFAULT_VAL_FRACTION, signal } = options;
  if (files.length === 0) throw new DataError("no input files were given", { hint: "Name one or more .jsonl, .json or .parquet files." });
  if (seqLen !== undefined && !(Number.isSafeInteger(seqLen) && seqLen > 0)) throw new DataError(`--seq-len must be a positive integer, got ${seqLen}`, { where: "--seq-len" });
  const limit = seqLen === undefined ? Infinity : seqLen + 1;
  const endToken = tokenizer.eos ?? tokenizer.endOfText;
  let template = options.chatTemplate;
  const templateFor = (file: string): ChatTemplate => {
    template ??= ChatTemplate.fromTokenizer(tokenizer.files, tokenizer.location ?? tokenizer.name);
    if (template === undefined) {
      throw new DataError(`chat rows need a chat template, and the tokenizer ${tokenizer.name} has none`, {
        where: file,
        hint: "Use a tokenizer folder whose tokenizer_config.json (or chat_template.jinja) holds one, or give a Jinja template with --chat-template FILE.",
      });
    }
    return template;
  };

  await options.onStart?.();
  const writer = await ExampleFileWriter.create(output, tokenizer);
  const formats: ExampleFormat[] = [];
  let rows = 0;
  let truncated = 0;
  let dropped = 0;
  try {
    for (const file of files) {
      let format = options.format;
      let fileRows = 0;
      for await (const row of readExampleRows(file)) {
        signal?.throwIfAborted();
        format ??= detectFormat(row);
        fileRows++;
        const { segments, separate } = exampleText(row, format, format === "chat" ? templateFor(file) : undefined);
        let tokens: TokenSegment[] = segments.map((s) => ({ ids: tokenizer.encode(s.text), trained: s.trained }));
        if (format === "chat" && endToken !== undefined) tokens = tokens.flatMap((s) => endTurnAt(s, endToken));
        if (separate && tokenizer.endOfText !== undefined) tokens.unshift({ ids: [tokenizer.endOfText], trained: false });
        if (format === "instruct" && endToken !== undefined) tokens.push({ ids: [endToken], trained: true });
        rows++;
        let kept = tokens;
        if (length(tokens) > limit) {
          if (longExamples === "drop") {
            dropped++;
            continue;
          }
          kept = cut(tokens, limit);
          truncated++;
        }
        // The first token is no token's target: an example needs a trained token after it.
        if (!trainsAfterFirst(kept)) {
          dropped++;
          continue;
        }
        await writer.add(kept);
        options.onProgress?.({ rows, tokens: writer.tokenCount, file });
      }
      if (fileRows === 0 || format === undefined) throw new DataError("the file holds no rows", { where: file, hint: "Give files with one example a row." });
      formats.push(format);
    }
    signal?.throwIfAborted();
    const usedTemplate = formats.includes("chat") ? template?.text : undefined;
    const sidecar = await writer.commit({ valFraction, sources: [...files], ...(usedTemplate !== undefined ? { chatTemplate: usedTemplate } : {}) });
    return { sidecar, formats, rows, truncated, dropped };
  } catch (err) {
    await writer.abort();
    throw err;
  }
}

/** A trained segment cut after its first `end` id: the rest is not trained. */
function endTurnAt(segment: TokenSegment, end: number): TokenSegment[] {
  const at = segment.trained ? segment.ids.indexOf(end) : -1;
  if (at < 0 || at === segment.ids.length - 1) return [segment];
  return [
    { ids: segment.ids.slice(0, at + 1), trained: true },
    { ids: segment.ids.slice(at + 1), trained: false },
  ];
}

function length(segments: readonly TokenSegment[]): number {
  return segments.reduce((n, s) => n + s.ids.length, 0);
}

function cut(segments: readonly TokenSegment[], limit: number): TokenSegment[] {
  const out: TokenSegment[] = [];
  let left = limit;
  for (const s of segments) {
    if (left === 0) break;
    out.push(s.ids.length <= left ? s : { ids: s.ids.slice(0, left), trained: s.trained });
    left -= Math.min(left, s.ids.length);
  }
  return out;
}

function trainsAfterFirst(segments: readonly TokenSegment[]): boolean {
  let position = 0;
  for (const s of segments) {
    if (s.trained && position + s.ids.length > 1 && s.ids.length > 0) return true;
    position += s.ids.length;
  }
  return false;
}
