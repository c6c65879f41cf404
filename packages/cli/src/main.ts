import { Command, CommanderError } from "commander";
import { KilnError } from "@kiln/contract";
import { registerDoctor } from "./commands/doctor.js";
import { registerEstimate } from "./commands/estimate.js";
import { registerPrepare } from "./commands/prepare.js";
import { KILN_VERSION } from "./version.js";

export function buildProgram(): Command {
  const program = new Command("kiln")
    .description("train GPT- and Llama-style language models on CPU (WebAssembly SIMD) and NVIDIA GPUs")
    .version(KILN_VERSION)
    .exitOverride()
    .showHelpAfterError();
  registerDoctor(program);
  registerEstimate(program);
  registerPrepare(program);
  return program;
}

/** Runs the CLI; resolves to the process exit code. User errors print what, where and what to do. */
export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof KilnError) {
      process.stderr.write(`kiln: ${err.describe()}\n`);
      return err.exitCode;
    }
    throw err;
  }
}
