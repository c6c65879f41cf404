import { type Command, Option } from "commander";
import { addSettingFlags } from "../config/setting-flags.js";
import { runTrain, type TrainFlags } from "../train/run-train.js";
import { FLOAT_DTYPES } from "@kiln/contract";
import { gpuList, nonNegativeInt, oneOf, positiveInt } from "./parse-flags.js";
import { SYNC_BACKENDS } from "../train/data-parallel-run.js";
import { PROFILE_DEFAULT_STEPS, PROFILE_WARMUP_STEPS } from "../train/step-profiling.js";

/** Adds the training flags to a command (train, and the bare `kiln -f cfg.yaml`). */
export function trainOptions(cmd: Command): Command {
  // Flags that set a config key come from core's settings table (config/setting-flags.ts); the rest describe this run only.
  return addSettingFlags(cmd.option("-f, --file <config.yaml>", "model and trainer config (see models/); optional with --init-from, which brings the model"), "train")
    .option("--resume <auto|path>", "continue from a checkpoint: auto = the newest good one in the output folder")
    .option("--overwrite", "start afresh in an output folder that holds an earlier run, moving that run into a dated earlier-run-* folder inside it")
    .option("--init-from <path>", "start from trained weights (optimizer fresh): a Hugging Face model folder or a kiln checkpoint; the model comes from it")
    .option("--lora-from <dir>", "with --init-from BASE: go on training a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors) over that base; its rank, alpha and targets come from it")
    .addOption(new Option("--export-dtype <dtype>", "dtype of final.safetensors (default: the training dtype)").argParser(oneOf(FLOAT_DTYPES)))
    .option("--ranks <n>", "data-parallel training on the CPU: start N ranks on this machine, each with its slice of every batch (torchrun's WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT are read too)", positiveInt)
    .option("--nnodes <n>", "data parallel across machines: run the same command on N machines, each starting its --ranks (default 1)", positiveInt)
    .option("--node-rank <r>", "data parallel across machines: this machine's index, 0 to N - 1 (0 where rank 0 listens)", nonNegativeInt)
    .option("--master-addr <host>", "data parallel: where rank 0 listens for the other ranks (default 127.0.0.1; MASTER_ADDR)")
    .option("--master-port <port>", "data parallel: rank 0's port (default: a free one with --ranks on one machine, 29500 across machines; MASTER_PORT)", positiveInt)
    .addOption(
      new Option(
        "--sync-backend <backend>",
        "gradient sync between ranks: nccl (GPU ranks, on the devices; their default where NCCL is found), cpu (host staging: shared memory on one machine, else TCP through rank 0; the default on one machine), gloo (host staging over Gloo's TCP ring; the default across machines where installed)",
      ).argParser(oneOf(SYNC_BACKENDS)),
    )
    .option("--max-restarts <n>", "data parallel with --ranks/--gpus/--nnodes: when a rank fails, start every rank again from the newest checkpoint (--resume auto), up to N times (default 0); under torchrun use its --max_restarts", nonNegativeInt)
    .option("--gpus <list>", "data parallel on GPUs: one rank per listed GPU ordinal, e.g. 0,1 (within CUDA_VISIBLE_DEVICES); implies --target-device gpu", gpuList)
    .option("--threads <n>", "CPU threads for kernels (default: every core, shared out between the ranks of this machine)", positiveInt)
    .option(
      "--profile [steps]",
      `time every kernel and data wait of [steps] steps (default ${PROFILE_DEFAULT_STEPS}) after the run's first ${PROFILE_WARMUP_STEPS}, print a table per region and kernel, write profile.json and trace.json (chrome://tracing, Perfetto) to the output folder; training goes on`,
      positiveInt,
    )
    .option("--headless", "JSON lines on stdout instead of a progress bar");
}

export function registerTrain(program: Command): void {
  trainOptions(program.command("train").description("train a model from a YAML config")).action(async (flags: TrainFlags) => {
    process.exitCode = await runTrain(flags);
  });
}
