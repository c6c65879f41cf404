import { mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { DataError, KilnError } from "@kiln/contract";
import { fileWriteError, openTokenizer, tokenizeFiles, type DataSidecar } from "@kiln/core";
import { expandInputs } from "./expand-inputs.js";
import { prepareProgress } from "./prepare-progress.js";

export interface PrepareRequest {
  inputs: string[];
  output: string;
  tokenizer: string;
  valFraction: number;
}

/** Ctrl-C or a termination signal stopped `kiln prepare`; nothing was written. */
export class PrepareInterrupted extends KilnError {
  override readonly exitCode = 130;
}

/**
 * `kiln prepare`: tokenizes text files into a u32 token file and its sidecar.
 * A signal (Ctrl-C) or any error leaves nothing at the output path.
 */
export async function runPrepare(request: PrepareRequest): Promise<DataSidecar> {
  const { output, valFraction } = request;
  const files = await expandInputs(request.inputs);
  const tokenizer = await openTokenizer(request.tokenizer);
  await checkOutput(output, files);

  const sizes = await Promise.all(files.map(async (f) => (await stat(f)).size));
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    controller.abort(new PrepareInterrupted(`interrupted by ${signal}; nothing was written`, { where: output, hint: "Run the same command again to prepare the data." }));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const progress = prepareProgress(process.stderr, files.length, sizes.reduce((a, b) => a + b, 0), tokenizer.name);
  try {
    return await tokenizeFiles({ files, output, tokenizer, valFraction, signal: controller.signal, onProgress: (p) => progress.update(p) });
  } finally {
    progress.stop();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** Creates the output's directory if needed; refuses an output that is a directory or one of the inputs. */
async function checkOutput(output: string, inputs: string[]): Promise<void> {
  const target = path.resolve(output);
  if (inputs.some((f) => path.resolve(f) === target)) {
    throw new DataError("the output file is also an input", { where: output, hint: "Write the tokens to a new file, such as data/corpus.bin." });
  }
  const existing = await stat(target).catch(() => undefined);
  if (existing?.isDirectory()) throw new DataError("output path is a directory", { where: output, hint: "Give a file name, such as data/corpus.bin." });
  try {
    await mkdir(path.dirname(target), { recursive: true });
  } catch (err) {
    throw fileWriteError(err, path.dirname(output), { what: "the output directory", doing: "create the output directory", error: DataError });
  }
}

