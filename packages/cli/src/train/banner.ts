import type { Backend } from "@kiln/contract";
import type { MemoryPlan, RecomputePolicy } from "@kiln/core";
import type { RunSettings } from "@kiln/core";
import { formatBytes, formatCount } from "../estimate/format-bytes.js";
import { formatProcessPeak, processPeak } from "../estimate/process-peak.js";
import { modelLayersOf } from "../estimate/model-layers.js";
import { loraRows } from "../estimate/lora-line.js";

/**
 * The start-of-run summary: device, model size, dtype and why, tokens per step, the run's
 * length and which limit decides it, the memory
 * plan against what is available, and the whole process's expected peak RSS (kiln estimate's figure).
 */
export function formatBanner(
  s: RunSettings,
  backend: Backend,
  parameters: number,
  plan: MemoryPlan & { evaluation: number; recompute: RecomputePolicy },
  data: string,
  deviceNote: string | undefined,
  precision: string,
  steps: string,
): string {
  const dev = backend.capabilities().device;
  const available = dev.memoryBytes;
  // What the backend's kernels reserved beside the plan once the steps were compiled (a GPU's library workspace, partial sums).
  const scratch = backend.memoryStats().kernelScratchBytes ?? 0;
  const total = plan.total + plan.evaluation + scratch;
  const pct = (b: number) => `${((100 * b) / available).toFixed(1)}%`;
  // The CPU backend's device memory is the process's own; a GPU's is not.
  const peak = processPeak({ planned: total, planOnHost: dev.kind !== "gpu", threads: dev.parallelism, batchSize: s.batchSize, seqLen: s.seqLen, prefetch: s.prefetch });
  const rows: [string, string][] = [
    ["device", `${dev.name}${dev.computeCapability ? `, compute ${dev.computeCapability}` : ""}${dev.libraries ? `; ${dev.libraries}` : ""}${s.cudaGraphs && backend.graphs ? "; each micro-batch one CUDA graph" : ""}${deviceNote ? ` (${deviceNote})` : ""}`],
    ["model", `${s.model.arch}, ${formatCount(parameters)} parameters, ${s.model.numLayers} layers, hidden ${s.model.hiddenSize}${modelLayersOf(s.model)}`],
    ...loraRows(s.model),
    ["dtype", precision],
    ["step", `${s.batchSize} x ${s.seqLen} tokens x ${s.gradAccum} accumulation = ${s.batchSize * s.seqLen * s.gradAccum} tokens`],
    ["steps", steps],
    ["data", data],
    [
      "memory",
      `${formatBytes(total)} of ${formatBytes(available)} (${pct(total)}): parameters ${formatBytes(plan.parameters)}, gradients ${formatBytes(plan.gradients)}, ` +
        `AdamW ${formatBytes(plan.optimizerState)}, activations ${formatBytes(plan.activations)} (recompute: ${plan.recompute}${s.recompute === "auto" ? ", auto" : ""}), ` +
        `evaluation ${formatBytes(plan.evaluation)}${scratch > 0 ? `, kernel scratch ${formatBytes(scratch)}` : ""}`,
    ],
    ["peak", formatProcessPeak(peak, dev.parallelism)],
    ["output", s.outputDir],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join("\n");
}
