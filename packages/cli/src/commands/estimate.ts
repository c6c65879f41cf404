import { type Command, Option } from "commander";
import { ConfigError } from "@kiln/contract";
import { loadConfigFile } from "../config/load-config.js";
import { resolveSettings } from "../config/settings.js";
import type { TrainingDTypeChoice } from "@kiln/core";
import { dtypeFromFlags } from "../config/dtype-choice.js";
import { KNOWN_DEVICES, autoDTypeFor, deviceProfile } from "../estimate/devices.js";
import { HEADROOM, estimateTraining } from "../estimate/estimate.js";
import { formatBytes, formatCount } from "../estimate/format-bytes.js";
import { dtypeChoice, oneOf, positiveInt } from "./parse-flags.js";

interface EstimateFlags {
  file: string;
  dtype?: TrainingDTypeChoice;
  bf16?: boolean;
  fp16?: boolean;
  device: string;
  batchSize?: number;
  seqLen?: number;
  gradAccum?: number;
  recompute?: "none" | "cheap" | "blocks";
  json?: boolean;
}

export function registerEstimate(program: Command): void {
  program
    .command("estimate")
    .description("memory and FLOPs of training a config, exactly as planned, and the largest batch that fits a device")
    .requiredOption("-f, --file <config.yaml>", "model and trainer config")
    .addOption(new Option("--dtype <dtype>", "training dtype: f32, bf16, f16 or auto (bf16 where the device runs it, else f16, else f32)").argParser(dtypeChoice))
    .option("--bf16", "same as --dtype bf16")
    .option("--fp16", "same as --dtype f16")
    .option("--device <name>", `device to plan for: ${KNOWN_DEVICES.join(", ")}`, "cpu")
    .option("--batch-size <n>", "micro-batch size", positiveInt)
    .option("--seq-len <n>", "sequence length", positiveInt)
    .option("--grad-accum <n>", "gradient accumulation steps", positiveInt)
    .addOption(new Option("--recompute <policy>", "none, cheap (GELU/norms) or blocks (checkpointing)").argParser(oneOf(["none", "cheap", "blocks"] as const)))
    .option("--json", "print the estimate as JSON")
    .action((flags: EstimateFlags) => {
      const asked = dtypeFromFlags(flags);
      const settings = resolveSettings(loadConfigFile(flags.file), {
        ...(asked ? { dtype: asked.dtype } : {}),
        ...(flags.batchSize ? { batchSize: flags.batchSize } : {}),
        ...(flags.seqLen ? { seqLen: flags.seqLen } : {}),
        ...(flags.gradAccum ? { gradAccum: flags.gradAccum } : {}),
        ...(flags.recompute ? { recompute: flags.recompute } : {}),
      });
      const device = deviceProfile(flags.device);
      if (!device) {
        throw new ConfigError(`unknown device "${flags.device}"`, { where: "--device", hint: `use one of ${KNOWN_DEVICES.join(", ")}` });
      }
      const dtype = settings.dtype === "auto" ? autoDTypeFor(device) : settings.dtype;
      const e = estimateTraining(settings.model, settings.batchSize, settings.seqLen, settings.gradAccum, dtype, device, settings.recompute);
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(e, null, 2)}\n`);
        return;
      }
      const m = e.memory;
      const pct = (b: number) => `${((100 * b) / device.memoryBytes).toFixed(1)}%`;
      const rows: [string, string][] = [
        ["model", `${settings.model.arch}, ${formatCount(e.parameters)} parameters (${e.parameters})`],
        ["step", `batch ${settings.batchSize} x seq ${settings.seqLen} x accum ${settings.gradAccum} = ${e.tokensPerStep} tokens, ${dtype}${settings.dtype === "auto" ? " (auto)" : ""}`],
        ["FLOPs", `${formatCount(e.flopsPerToken)} per token, ${(e.flopsPerStep / 1e12).toPrecision(3)} TFLOP per step`],
        ["parameters", `${formatBytes(m.parameters)}${dtype === "f32" ? "" : " (incl. f32 master weights)"}`],
        ["gradients", `${formatBytes(m.gradients)}${dtype === "f32" ? "" : " (incl. their f32 sums)"}`],
        ["optimizer", `${formatBytes(m.optimizerState)} (AdamW m, v in f32)`],
        ["activations", `${formatBytes(m.activations)} (${formatBytes(m.activationsUnpacked)} without reuse; recompute: ${settings.recompute})`],
        ["io", formatBytes(m.io)],
        ["total", `${formatBytes(m.total)} of ${formatBytes(device.memoryBytes)} on ${device.name} (${pct(m.total)})`],
        ["largest batch", e.largestBatch > 0 ? `${e.largestBatch} (within ${HEADROOM * 100}% of device memory)` : "none: even batch 1 does not fit"],
        ["ideal step", `${e.idealStepSeconds.toPrecision(3)} s at 100% of peak`],
      ];
      const width = Math.max(...rows.map(([k]) => k.length));
      process.stdout.write(`kiln estimate ${flags.file}\n${rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join("\n")}\n`);
      if (!e.fits) {
        process.stdout.write(`\ndoes not fit: lower --batch-size (largest: ${e.largestBatch}) or --seq-len, use --grad-accum for the same tokens per step, or --dtype bf16\n`);
        process.exitCode = 1;
      }
    });
}
