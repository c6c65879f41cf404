import { mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { DataError, KilnError } from "@kiln/contract";
import {
  ChatTemplate,
  type DataSidecar,
  type ExampleFormat,
  type LongExamplePolicy,
  type PreparedExamples,
  type SkippedInput,
  convertU16TokenFile,
  dataSidecarPath,
  exampleMaskPath,
  fileWriteError,
  isExampleFile,
  openTokenizer,
  prepareExamples,
  tokenizeFiles,
} from "@kiln/core";
import { expandInputs } from "./expand-inputs.js";
import { type PrepareProgress, prepareProgress } from "./prepare-progress.js";

export interface PrepareRequest {
  inputs: string[];
  /** A file of 16-bit token ids to convert, in place of `inputs`. */
  fromU16?: string;
  output: string;
  tokenizer: string;
  valFraction: number;
  /** Refuse an input that is not text instead of skipping it. */
  strict: boolean;
  /** Replace an existing output file and sidecar. */
  overwrite: boolean;
  /** Example rows (chat, instruct, text) rather than text files; detected when every input is a .jsonl, .json or .parquet file. */
  format?: ExampleFormat;
  /** A Jinja chat template file in place of the tokenizer's. */
  chatTemplate?: string;
  /** Examples longer than seqLen + 1 tokens are cut or dropped (longExamples). */
  seqLen?: number;
  longExamples?: LongExamplePolicy;
}

export interface PrepareResult {
  sidecar: DataSidecar;
  /** Inputs left out because they are not text. */
  skipped: SkippedInput[];
  /** The 16-bit token file converted, when that was asked. */
  fromU16?: string;
  /** For example rows: their formats and counts. */
  examples?: Omit<PreparedExamples, "sidecar">;
}

/** Ctrl-C or a termination signal stopped `kiln prepare`; nothing was written. */
export class PrepareInterrupted extends KilnError {
  override readonly exitCode = 130;
}

/**
 * `kiln prepare`: tokenizes text files into a u32 token file and its sidecar, or
 * widens a file of 16-bit ids into one. Inputs that are not text are skipped and
 * named on stderr (refused with `strict`); an existing output is kept unless
 * `overwrite`. A signal (Ctrl-C) or any error leaves nothing at the output path.
 */
export async function runPrepare(request: PrepareRequest): Promise<PrepareResult> {
  const { output, valFraction } = request;
  if (request.fromU16 !== undefined && request.inputs.length > 0) {
    throw new DataError("--from-u16 and -i/--input cannot be given together", {
      where: "--from-u16",
      hint: "Run kiln prepare once for the text files and once for the 16-bit token file, each with its own -o.",
    });
  }
  const files = request.fromU16 !== undefined ? [request.fromU16] : await expandInputs(request.inputs);
  const asExamples = request.fromU16 === undefined && exampleInputs(files, request);
  if (!asExamples && (request.chatTemplate !== undefined || request.seqLen !== undefined || request.longExamples !== undefined)) {
    const flag = request.chatTemplate !== undefined ? "--chat-template" : request.seqLen !== undefined ? "--seq-len" : "--long-examples";
    throw new DataError(`${flag} applies to example rows (.jsonl, .json, .parquet or --format), and these inputs are text files`, { where: flag, hint: "Leave the flag out, or pass --format chat|instruct|text." });
  }
  const tokenizer = await openTokenizer(request.tokenizer);
  const template = request.chatTemplate !== undefined ? await ChatTemplate.fromFile(request.chatTemplate, tokenizer.files) : undefined;
  await checkOutput(output, files, request.overwrite);

  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    controller.abort(new PrepareInterrupted(`interrupted by ${signal}; nothing was written`, { where: output, hint: "Run the same command again to prepare the data." }));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const skipped: SkippedInput[] = [];
  let progress: PrepareProgress | undefined;
  try {
    if (request.fromU16 !== undefined) {
      process.stderr.write(`kiln prepare: widening the 16-bit token ids of ${request.fromU16} to u32 (tokenizer ${tokenizer.name})\n`);
      const sidecar = await convertU16TokenFile({ input: request.fromU16, output, tokenizer, valFraction, signal: controller.signal, onStart: () => makeOutputDirectory(output) });
      return { sidecar, skipped, fromU16: request.fromU16 };
    }
    if (asExamples) {
      process.stderr.write(`kiln prepare: tokenizing the examples of ${files.length} file${files.length === 1 ? "" : "s"} with ${tokenizer.name}\n`);
      const { sidecar, ...examples } = await prepareExamples({
        files,
        output,
        tokenizer,
        ...(request.format !== undefined ? { format: request.format } : {}),
        ...(template !== undefined ? { chatTemplate: template } : {}),
        ...(request.seqLen !== undefined ? { seqLen: request.seqLen } : {}),
        ...(request.longExamples !== undefined ? { longExamples: request.longExamples } : {}),
        valFraction,
        signal: controller.signal,
        onStart: () => makeOutputDirectory(output),
      });
      return { sidecar, skipped, examples };
    }
    const sidecar = await tokenizeFiles({
      files,
      output,
      tokenizer,
      valFraction,
      signal: controller.signal,
      ...(request.strict ? {} : { onNotText: (s: SkippedInput) => skipped.push(s) }),
      onStart: async ({ files: used, bytesTotal }) => {
        await makeOutputDirectory(output);
        progress = prepareProgress(process.stderr, used.length, bytesTotal, tokenizer.name);
      },
      onProgress: (p) => progress?.update(p),
    });
    // An example file's mask replaced by plain tokens (--overwrite) would be stale.
    await rm(exampleMaskPath(output), { force: true });
    return { sidecar, skipped };
  } finally {
    progress?.stop();
    if (skipped.length > 0) process.stderr.write(skippedReport(skipped, files.length));
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** Whether the inputs are example rows: --format says so, or every file is .jsonl, .json or .parquet (a mix is refused). */
function exampleInputs(files: readonly string[], request: PrepareRequest): boolean {
  if (request.format !== undefined) return true;
  const rows = files.filter(isExampleFile);
  if (rows.length === 0) return false;
  if (rows.length < files.length) {
    const text = files.find((f) => !isExampleFile(f))!;
    throw new DataError(`the inputs mix example files (${rows[0]}) with text files (${text})`, { where: text, hint: "Prepare the example rows and the text files apart, each with its own -o." });
  }
  return true;
}

/** The inputs left out, one a line, after their count. */
function skippedReport(skipped: SkippedInput[], of: number): string {
  const lines = skipped.map((s) => `  ${s.file}: ${s.reason}\n`).join("");
  return `kiln prepare: skipped ${skipped.length} of ${of} input file${of === 1 ? "" : "s"}, which ${skipped.length === 1 ? "is" : "are"} not text (--strict refuses them instead):\n${lines}`;
}

/** Refuses an output that is a directory or one of the inputs, and one that exists (or whose sidecar does) unless `overwrite`. */
async function checkOutput(output: string, inputs: string[], overwrite: boolean): Promise<void> {
  const target = path.resolve(output);
  if (inputs.some((f) => path.resolve(f) === target)) {
    throw new DataError("the output file is also an input", { where: output, hint: "Write the tokens to a new file, such as data/corpus.bin." });
  }
  const existing = await stat(target).catch(() => undefined);
  if (existing?.isDirectory()) throw new DataError("output path is a directory", { where: output, hint: "Give a file name, such as data/corpus.bin." });
  if (!overwrite) {
    const sidecar = dataSidecarPath(output);
    const mask = exampleMaskPath(output);
    const exists = async (p: string) => (await stat(p).catch(() => undefined)) !== undefined;
    const taken = existing !== undefined ? output : (await exists(sidecar)) ? sidecar : (await exists(mask)) ? mask : undefined;
    if (taken !== undefined) {
      const what = taken === output ? "the output file" : taken === sidecar ? "the output's sidecar" : "the output's loss mask";
      throw new DataError(`${what} already exists; kiln prepare does not replace it unasked`, {
        where: taken,
        hint: "Pass --overwrite to replace the token file and its sidecar, or name another output with -o.",
      });
    }
  }
}

/** Creates the output's directory if needed, once the inputs were checked (a refused run leaves none behind). */
async function makeOutputDirectory(output: string): Promise<void> {
  try {
    await mkdir(path.dirname(path.resolve(output)), { recursive: true });
  } catch (err) {
    throw fileWriteError(err, path.dirname(output), { what: "the output directory", doing: "create the output directory", error: DataError });
  }
}
