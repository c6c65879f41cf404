import { type Command, Option } from "commander";
import { ConfigError, FLOAT_DTYPES, type FloatDType } from "@kiln/contract";
import { type GgmlType, exportGguf, exportHfFolder, exportPeftAdapter } from "@kiln/core";
import { oneOf } from "./parse-flags.js";

const FORMATS = ["hf", "gguf"] as const;
const GGUF_TYPES = ["f32", "f16", "bf16", "q8_0"] as const satisfies readonly GgmlType[];

interface ExportFlags {
  checkpoint: string;
  out: string;
  adapterOnly?: boolean;
  format: (typeof FORMATS)[number];
  dtype: GgmlType;
}

export function registerExport(program: Command): void {
  program
    .command("export")
    .description("write a checkpoint as a Hugging Face model folder (transformers loads it) or a GGUF file (llama.cpp loads it)")
    .requiredOption("--checkpoint <file>", "a .safetensors written by kiln train (final.safetensors or step_N.safetensors)")
    .requiredOption("--out <path>", "the folder to create (it must not exist, or be empty), or with --format gguf the file")
    .addOption(new Option("--format <format>", "hf: a Hugging Face folder; gguf: one GGUF file (GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma 3; dense)").argParser(oneOf(FORMATS)).default("hf"))
    .option("--adapter-only", "a LoRA run's adapters alone, as a PEFT folder (adapter_config.json, adapter_model.safetensors) that PeftModel.from_pretrained loads over the base; without it a LoRA checkpoint is exported merged into the base weights")
    .addOption(new Option("--dtype <dtype>", "dtype of the weights: f32, bf16 or f16 (hf); f32, f16, bf16 or q8_0 (gguf)").argParser(oneOf(GGUF_TYPES)).default("f32"))
    .action(async (f: ExportFlags) => {
      if (f.adapterOnly && f.format === "gguf") {
        throw new ConfigError("--adapter-only writes a PEFT adapter folder; a GGUF file holds the merged model", { where: "kiln export --adapter-only", hint: "leave out --format gguf for the adapter, or --adapter-only for a merged GGUF" });
      }
      if (f.format === "gguf") {
        const done = await exportGguf(f.checkpoint, f.out, f.dtype);
        const types = Object.entries(done.byType).map(([t, n]) => `${n} ${t}`).join(", ");
        process.stdout.write(`wrote ${f.out}: llama.cpp architecture ${done.arch}, ${done.tensors} tensors (${types})\n`);
        for (const note of done.notes) process.stdout.write(`note: ${note}\n`);
        return;
      }
      if (!(FLOAT_DTYPES as readonly string[]).includes(f.dtype)) {
        throw new ConfigError(`--dtype ${f.dtype} is a GGUF quantization; a Hugging Face folder holds f32, bf16 or f16`, { where: "kiln export --dtype", hint: "add --format gguf, or pick --dtype f32, bf16 or f16" });
      }
      const files = await (f.adapterOnly ? exportPeftAdapter : exportHfFolder)(f.checkpoint, f.out, f.dtype as FloatDType);
      process.stdout.write(`wrote ${f.out}: ${files.join(", ")}\n`);
    });
}
