import { type Command, Option } from "commander";
import { FLOAT_DTYPES, type FloatDType } from "@kiln/contract";
import { exportHfFolder } from "@kiln/core";
import { oneOf } from "./parse-flags.js";

interface ExportFlags {
  checkpoint: string;
  out: string;
  dtype: FloatDType;
}

export function registerExport(program: Command): void {
  program
    .command("export")
    .description("write a checkpoint as a Hugging Face model folder (transformers loads it)")
    .requiredOption("--checkpoint <file>", "a .safetensors written by kiln train (final.safetensors or step_N.safetensors)")
    .requiredOption("--out <dir>", "the folder to create (it must not exist, or be empty)")
    .addOption(new Option("--dtype <dtype>", "dtype of model.safetensors").argParser(oneOf(FLOAT_DTYPES)).default("f32"))
    .action(async (f: ExportFlags) => {
      const files = await exportHfFolder(f.checkpoint, f.out, f.dtype);
      process.stdout.write(`wrote ${f.out}: ${files.join(", ")}\n`);
    });
}
