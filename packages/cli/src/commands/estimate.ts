import { type Command, Option } from "commander";
import { positiveInt } from "./parse-flags.js";
import { loadConfigFile, weightsOnlyConfig } from "../config/load-config.js";
import { TARGET_DEVICES, pretrainedModel, resolveSettings } from "@kiln/core";
import { KNOWN_DEVICES, autoDTypeFor, plannedDevice } from "../estimate/devices.js";
import { parseByteSize } from "../estimate/parse-size.js";
import { addSettingFlags, settingOverrides } from "../config/setting-flags.js";
import { HEADROOM, estimateTraining } from "../estimate/estimate.js";
import { formatBytes, formatCount, formatFlops, formatSeconds } from "../estimate/format-bytes.js";
import { formatProcessPeak } from "../estimate/process-peak.js";
import { formatKernelRooflines } from "../estimate/kernel-roofline-table.js";
import { modelLayersOf } from "../estimate/model-layers.js";
import { loraRows } from "../estimate/lora-line.js";

interface EstimateFlags {
  [flag: string]: unknown;
  file?: string;
  initFrom?: string;
  deviceMemory?: number;
  json?: boolean;
  kernels?: boolean;
  ranks?: number;
}

export function registerEstimate(program: Command): void {
  const estimate = program
    .command("estimate")
    .description("memory and FLOPs of training a config, exactly as planned, and the largest batch that fits a device")
    .option("-f, --file <config.yaml>", "model and trainer config (its model section left out with --init-from)")
    .option("--init-from <path>", "plan for the model of a Hugging Face folder (its config.json alone will do) or a kiln checkpoint");
  // Flags that set a config key come from core's settings table (config/setting-flags.ts);
  // --target-device (--device) also takes a device of the GPU table here, checked by plannedDevice.
  addSettingFlags(estimate, "estimate", { "trainer.target_device": (name) => name.toLowerCase() })
    .option("--device-memory <size>", "memory of the device to plan for, e.g. 24GiB or 80GB: any other device, or a part of one", parseByteSize)
    .option("--ranks <n>", "plan one of N data-parallel ranks (with --shard-optimizer, its share of the optimizer state; default 1)", positiveInt)
    .option("--json", "print the estimate as JSON")
    .option("--kernels", "also print the roofline step kernel by kernel: calls, bytes, FLOPs, least time and what bounds it (devices with a bandwidth figure)")
    .action(async (flags: EstimateFlags) => {
      const overrides = settingOverrides("estimate", flags);
      const asked = overrides.get("trainer.target_device");
      // A device of the table is planned for as itself, and as a GPU run (or a CPU one) otherwise.
      const named = asked && !(TARGET_DEVICES as readonly unknown[]).includes(asked.value) ? { name: asked.value as string, flag: asked.from } : undefined;
      if (named) overrides.set("trainer.target_device", { ...asked!, value: "gpu" });
      const config = flags.file !== undefined ? loadConfigFile(flags.file) : weightsOnlyConfig(flags.initFrom, "estimate");
      const settings = resolveSettings(config, overrides, flags.initFrom === undefined ? undefined : await pretrainedModel(flags.initFrom), { needsLength: false });
      const device = await plannedDevice(named?.name ?? settings.targetDevice, flags.deviceMemory, asked?.from ?? "--target-device", asked !== undefined);
      const dtype = settings.dtype === "auto" ? autoDTypeFor(device) : settings.dtype;
      const ranks = flags.ranks ?? 1;
      const shardRanks = settings.shardOptimizer ? ranks : 1;
      const e = estimateTraining(settings.model, settings.batchSize, settings.seqLen, settings.gradAccum, dtype, device, settings.recompute, settings.prefetch, shardRanks);
      // What the optimizer state of the same run would take unsharded, for the saving.
      const unsharded = shardRanks > 1 ? estimateTraining(settings.model, settings.batchSize, settings.seqLen, settings.gradAccum, dtype, device, settings.recompute, settings.prefetch) : undefined;
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(e, null, 2)}\n`);
        return;
      }
      const m = e.memory;
      const pct = (b: number) => `${((100 * b) / device.memoryBytes).toFixed(1)}%`;
      const rows: [string, string][] = [
        ["model", `${settings.model.arch}, ${formatCount(e.parameters)} parameters (${e.parameters})${settings.model.numExperts ? `, ${formatCount(e.activeParameters)} active per token` : ""}`],
        ["layers", `${settings.model.numLayers}, hidden ${settings.model.hiddenSize}${modelLayersOf(settings.model)}`],
        ["step", `batch ${settings.batchSize} x seq ${settings.seqLen} x accum ${settings.gradAccum} = ${e.tokensPerStep} tokens, ${dtype}${settings.dtype === "auto" ? " (auto)" : ""}`],
        ["FLOPs", `${formatFlops(e.flopsPerToken)} per token, ${formatFlops(e.flopsPerStep)} per step`],
        ...loraRows(settings.model),
        ["parameters", `${formatBytes(m.parameters)}${dtype === "f32" ? "" : " (incl. f32 master weights)"}`],
        ["gradients", `${formatBytes(m.gradients)}${dtype === "f32" ? "" : " (incl. their f32 sums)"}`],
        [
          "optimizer",
          `${formatBytes(m.optimizerState)} (AdamW m, v in f32)` +
            (unsharded
              ? `: this rank's share of ${formatBytes(unsharded.memory.optimizerState)}, sharded over ${ranks} ranks (${formatBytes(unsharded.memory.total - m.total)} less a rank in all)`
              : settings.shardOptimizer
                ? "; --shard-optimizer needs --ranks N (N > 1) to plan a rank's share"
                : ""),
        ],
        ["activations", `${formatBytes(m.activations)} (${formatBytes(m.activationsUnpacked)} without reuse; recompute: ${e.recompute}${settings.recompute === "auto" ? ", auto" : ""})`],
        ["io", formatBytes(m.io)],
        ["total", `${formatBytes(m.total)} of ${formatBytes(device.memoryBytes)} on ${device.name} (${pct(m.total)})`],
        ["evaluation", `${formatBytes(e.evaluation)} more (between steps, in the training arena where it fits)`],
        // The CUDA kernels' own scratch is sized from the compiled calls: kiln train shows it, a plan cannot.
        ...(device.threads === undefined
          ? ([["kernel scratch", "not counted: the GPU kernels' own (cuBLASLt's 32 MiB workspace, partial sums), which kiln train reserves when it compiles the step and shows in its banner"]] as [string, string][])
          : []),
        ["peak", formatProcessPeak(e.process, device.threads ?? 1)],
        ["largest batch", e.largestBatch > 0 ? `${e.largestBatch} (within ${HEADROOM * 100}% of device memory)` : "none: even batch 1 does not fit"],
        ["ideal step", Number.isFinite(e.idealStepSeconds) ? `${formatSeconds(e.idealStepSeconds)} at 100% of peak` : `unknown: no ${dtype} peak FLOP/s figure for ${device.name}`],
        ...(e.roofline
          ? ([
              [
                "roofline step",
                `${formatSeconds(e.roofline.stepSeconds)} with each kernel at the longer of its FLOPs at peak and its operand bytes (${(e.roofline.bytesPerStep / 1e9).toFixed(1)} GB a step) at ${(device.memoryBandwidth! / 1e9).toFixed(0)} GB/s: MFU at most ${(100 * e.roofline.mfu).toFixed(0)}%`,
              ],
            ] as [string, string][])
          : []),
      ];
      const width = Math.max(...rows.map(([k]) => k.length));
      process.stdout.write(`kiln estimate ${[flags.file, flags.initFrom && `--init-from ${flags.initFrom}`].filter(Boolean).join(" ")}\n${rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join("\n")}\n`);
      if (flags.kernels) process.stdout.write(e.roofline ? `\n${formatKernelRooflines(e.roofline.kernels, e.roofline.stepSeconds)}` : `\nno roofline by kernel: no memory bandwidth figure for ${device.name}\n`);
      if (device.note) process.stdout.write(`\nnote: ${device.note}\n`);
      if (device.unsupported) process.stdout.write(`\nnote: ${device.name} is ${device.unsupported}: kiln can plan for it, but cannot train on it\n`);
      if (!e.fits) {
        process.stdout.write(`\ndoes not fit: lower --batch-size (largest: ${e.largestBatch}) or --seq-len, use --grad-accum for the same tokens per step, or --dtype bf16\n`);
        process.exitCode = 1;
      }
    });
}
