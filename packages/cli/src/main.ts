import { Command, CommanderError } from "commander";
import { KilnError } from "@kiln/contract";
import { registerDashboard } from "./commands/dashboard.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerEstimate } from "./commands/estimate.js";
import { registerEval } from "./commands/eval.js";
import { registerExport } from "./commands/export.js";
import { registerPlot } from "./commands/plot.js";
import { registerPrepare } from "./commands/prepare.js";
import { registerPush } from "./commands/push.js";
import { registerSample } from "./commands/sample.js";
import { registerTrain } from "./commands/train.js";
import { registerWeb } from "./commands/web.js";
import { reportUsageErrors } from "./commands/usage-error.js";
import { KILN_VERSION } from "./version.js";

export function buildProgram(): Command {
  const program = new Command("kiln")
    .description("train GPT- and Llama-style language models on CPU (WebAssembly SIMD) and NVIDIA GPUs")
    .version(KILN_VERSION)
    .exitOverride();
  registerTrain(program);
  registerPrepare(program);
  registerSample(program);
  registerEval(program);
  registerExport(program);
  registerPush(program);
  registerDoctor(program);
  registerEstimate(program);
  registerPlot(program);
  registerDashboard(program);
  registerWeb(program);
  reportUsageErrors(program);
  return program;
}

/** Runs the CLI; resolves to the process exit code. User errors print what, where and what to do. */
export async function main(argv: string[]): Promise<number> {
  try {
    // `kiln -f cfg.yaml ...` without a subcommand trains.
    const args = argv.length > 0 && argv[0].startsWith("-") && (argv.includes("-f") || argv.includes("--file") || argv.some((a) => a.startsWith("--file="))) ? ["train", ...argv] : argv;
    await buildProgram().parseAsync(args, { from: "user" });
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
