import { type Command, InvalidArgumentError } from "commander";
import { EXAMPLE_FORMATS, type ExampleFormat, LONG_EXAMPLE_POLICIES, type LongExamplePolicy, TOKENIZER_NAMES, dataSidecarPath, exampleMaskPath } from "@kiln/core";
import { type PrepareResult, runPrepare } from "../prepare/run-prepare.js";

interface PrepareFlags {
  input?: string[];
  fromU16?: string;
  output: string;
  tokenizer: string;
  val: number;
  strict?: boolean;
  overwrite?: boolean;
  format?: ExampleFormat;
  chatTemplate?: string;
  seqLen?: number;
  longExamples?: LongExamplePolicy;
}

function oneOf<T extends string>(values: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(values as readonly string[]).includes(value)) throw new InvalidArgumentError(`expected one of ${values.join(", ")}, got "${value}"`);
    return value as T;
  };
}

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!(Number.isSafeInteger(n) && n > 0)) throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !(n >= 0 && n < 1)) throw new InvalidArgumentError(`expected a fraction in [0, 1), such as 0.01, got "${value}"`);
  return n;
}

const plural = (n: number, word: string) => `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;

/** "from 3 files, 2 skipped as not text", or "from train.bin's 16-bit ids". */
function fromWhat(result: PrepareResult): string {
  if (result.fromU16 !== undefined) return `from ${result.fromU16}'s 16-bit ids`;
  if (result.examples !== undefined) {
    const { sidecar } = result;
    const e = result.examples;
    const formats = [...new Set(e.formats)].join(", ");
    const cut = [e.truncated > 0 ? `${plural(e.truncated, "example")} truncated` : "", e.dropped > 0 ? `${plural(e.dropped, "row")} dropped` : ""].filter(Boolean).join(", ");
    return `in ${plural(sidecar.examples!, "example")} (${formats}) from ${plural(e.rows, "row")} of ${plural(sidecar.sources.length, "file")}${cut ? `, ${cut}` : ""}, ${sidecar.trained_tokens!.toLocaleString("en-US")} trained`;
  }
  const skipped = result.skipped.length;
  return `from ${plural(result.sidecar.sources.length, "file")}, ${skipped.toLocaleString("en-US")} skipped${skipped > 0 ? " as not text" : ""}`;
}

export function registerPrepare(program: Command): void {
  program
    .command("prepare")
    .description("tokenize text files into a token file (.bin, u32) and its sidecar (.bin.json) for training, chat, instruct or text example rows into one with a loss mask (.bin.mask), or convert a file of 16-bit token ids")
    .option("-i, --input <paths...>", "text files or directories (each file is one document; UTF-8, plain or .gz/.zst/.xz-compressed; files that are not text are skipped and named), or .jsonl, .json and .parquet files of example rows")
    .option("--from-u16 <file>", "instead of -i: convert a file of 16-bit token ids (nanoGPT's train.bin, uint16, no header) into a u32 token file")
    .requiredOption("-o, --output <file.bin>", "token file to write; the sidecar goes to <file.bin>.json")
    .option("--tokenizer <name>", `tokenizer: ${TOKENIZER_NAMES.join(", ")}, a Hugging Face tokenizer folder (tokenizer.json), or a kiln checkpoint (its tokenizer); with --from-u16, the one the ids are of`, "gpt2")
    .option("--val <fraction>", "fraction of the tokens, at the end, kept for validation", fraction, 0.01)
    .option("--strict", "refuse an input that is not text (binary, or not UTF-8) instead of skipping it")
    .option("--overwrite", "replace the output file and its sidecar when they exist (else they are kept and prepare refuses)")
    .option("--format <format>", `example rows in .jsonl, .json or .parquet files: ${EXAMPLE_FORMATS.join(", ")} (detected from the first row's keys when every input is such a file); only assistant turns (chat) or completions (instruct) are trained, and each example trains on its own row`, oneOf(EXAMPLE_FORMATS))
    .option("--chat-template <file>", "a Jinja chat template for chat rows, in place of the tokenizer folder's")
    .option("--seq-len <n>", "the training seq_len: an example longer than n + 1 tokens is cut or dropped (--long-examples)", positiveInteger)
    .option("--long-examples <policy>", `what to do with an example longer than --seq-len: ${LONG_EXAMPLE_POLICIES.join(", ")} (default truncate)`, oneOf(LONG_EXAMPLE_POLICIES))
    .action(async (flags: PrepareFlags) => {
      const result = await runPrepare({
        inputs: flags.input ?? [],
        fromU16: flags.fromU16,
        output: flags.output,
        tokenizer: flags.tokenizer,
        valFraction: flags.val,
        strict: flags.strict === true,
        overwrite: flags.overwrite === true,
        ...(flags.format !== undefined ? { format: flags.format } : {}),
        ...(flags.chatTemplate !== undefined ? { chatTemplate: flags.chatTemplate } : {}),
        ...(flags.seqLen !== undefined ? { seqLen: flags.seqLen } : {}),
        ...(flags.longExamples !== undefined ? { longExamples: flags.longExamples } : {}),
      });
      const { sidecar } = result;
      process.stdout.write(
        `wrote ${flags.output}: ${sidecar.tokens.toLocaleString("en-US")} tokens ${fromWhat(result)} ` +
          `(tokenizer ${sidecar.tokenizer}, vocab ${sidecar.vocab_size}, validation ${sidecar.val_fraction}); sidecar ${dataSidecarPath(flags.output)}` +
          `${result.examples !== undefined ? `, loss mask ${exampleMaskPath(flags.output)}` : ""}\n`,
      );
    });
}
