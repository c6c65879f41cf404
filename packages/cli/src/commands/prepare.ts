import { type Command, InvalidArgumentError } from "commander";
import { TOKENIZER_NAMES, dataSidecarPath } from "@kiln/core";
import { runPrepare } from "../prepare/run-prepare.js";

interface PrepareFlags {
  input: string[];
  output: string;
  tokenizer: string;
  val: number;
}

function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !(n >= 0 && n < 1)) throw new InvalidArgumentError(`expected a fraction in [0, 1), such as 0.01, got "${value}"`);
  return n;
}

export function registerPrepare(program: Command): void {
  program
    .command("prepare")
    .description("tokenize text files into a token file (.bin, u32) and its sidecar (.bin.json) for training")
    .requiredOption("-i, --input <paths...>", "text files or directories (each file is one document)")
    .requiredOption("-o, --output <file.bin>", "token file to write; the sidecar goes to <file.bin>.json")
    .option("--tokenizer <name>", `tokenizer: ${TOKENIZER_NAMES.join(", ")}, a Hugging Face tokenizer folder (tokenizer.json), or a kiln checkpoint (its tokenizer)`, "gpt2")
    .option("--val <fraction>", "fraction of the tokens, at the end, kept for validation", fraction, 0.01)
    .action(async (flags: PrepareFlags) => {
      const sidecar = await runPrepare({ inputs: flags.input, output: flags.output, tokenizer: flags.tokenizer, valFraction: flags.val });
      process.stdout.write(
        `wrote ${flags.output}: ${sidecar.tokens.toLocaleString("en-US")} tokens from ${sidecar.sources.length} file${sidecar.sources.length === 1 ? "" : "s"} ` +
          `(tokenizer ${sidecar.tokenizer}, vocab ${sidecar.vocab_size}, validation ${sidecar.val_fraction}); sidecar ${dataSidecarPath(flags.output)}\n`,
      );
    });
}
