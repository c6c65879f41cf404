import { TARGET_DEVICES } from "../train/open-backend.js";
import { type Command, Option } from "commander";
import { runTrain, type TrainFlags } from "../train/run-train.js";
import { FLOAT_DTYPES } from "@kiln/contract";
import { dtypeChoice, nonNegativeInt, oneOf, positiveInt } from "./parse-flags.js";

/** Adds the training flags to a command (train, and the bare `kiln -f cfg.yaml`). */
export function trainOptions(cmd: Command): Command {
  return cmd
    .requiredOption("-f, --file <config.yaml>", "model and trainer config (see models/)")
    .option("-d, --data <tokens.bin>", "token file (u32 .bin or llm.c shard); default: the built-in corpus")
    .option("--batch-size <n>", "micro-batch size", positiveInt)
    .option("--seq-len <n>", "tokens per sequence (<= model.max_seq_len)", positiveInt)
    .option("--grad-accum <n>", "micro-batches per optimizer step", positiveInt)
    .option("--max-steps <n>", "optimizer steps to train for", positiveInt)
    .option("--prefetch <n>", "batches read ahead of compute", nonNegativeInt)
    .option("--resume <auto|path>", "continue from a checkpoint: auto = newest in the output folder")
    .option("--max-checkpoints <n>", "keep only the newest N step checkpoints", positiveInt, 5)
    .addOption(new Option("--target-device <device>", "where to train: auto (the GPU when usable), cpu or gpu").argParser(oneOf(TARGET_DEVICES)))
    .addOption(new Option("--dtype <dtype>", "training dtype: f32, bf16, f16 (with loss scaling) or auto (bf16 where the device runs it, else f16, else f32)").argParser(dtypeChoice))
    .option("--bf16", "same as --dtype bf16")
    .option("--fp16", "same as --dtype f16")
    .option("--tf32", "allow TF32 matmuls on CUDA for f32 training (trainer.tf32)")
    .addOption(new Option("--export-dtype <dtype>", "dtype of final.safetensors (default: the training dtype)").argParser(oneOf(FLOAT_DTYPES)))
    .option("--gpus <list>", "GPU ordinals for data-parallel training, e.g. 0,1")
    .addOption(new Option("--sync-backend <backend>", "gradient sync across devices").argParser(oneOf(["cpu", "nccl"] as const)))
    .addOption(new Option("--recompute <policy>", "recompute activations in backward: none, cheap (GELU/norms), blocks (checkpointing)").argParser(oneOf(["none", "cheap", "blocks"] as const)))
    .option("--threads <n>", "CPU threads for kernels (default: every core)", positiveInt)
    .option("--seed <n>", "seed for initialisation and data order", nonNegativeInt)
    .option("--eval-interval <n>", "steps between validation runs", positiveInt)
    .option("--log-interval <n>", "steps between log lines", positiveInt)
    .option("--output-dir <dir>", "checkpoints and metrics.jsonl (default: trainer.checkpoint_dir or checkpoints/<config name>)")
    .option("--headless", "JSON lines on stdout instead of a progress bar");
}

export function registerTrain(program: Command): void {
  trainOptions(program.command("train").description("train a model from a YAML config")).action(async (flags: TrainFlags) => {
    process.exitCode = await runTrain(flags);
  });
}
