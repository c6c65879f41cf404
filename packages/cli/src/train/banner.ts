import type { Backend } from "@kiln/contract";
import { type MemoryPlan, type ModelConfig, type RecomputePolicy, mamba3Of, mambaOf, mlaOf, moeOf } from "@kiln/core";
import type { RunSettings } from "@kiln/core";
import { formatBytes, formatCount } from "../estimate/format-bytes.js";
import { formatProcessPeak, processPeak } from "../estimate/process-peak.js";

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
    ["model", `${s.model.arch}, ${formatCount(parameters)} parameters, ${s.model.numLayers} layers, hidden ${s.model.hiddenSize}${mambaLayersOf(s.model)}${latentAttentionOf(s.model)}${expertsOf(s.model)}`],
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

/** ", latent attention (kv 32, q 48, rope 8)" for multi-head latent attention, else "". */
function latentAttentionOf(m: ModelConfig): string {
  const mla = mlaOf(m);
  return mla ? `, latent attention (kv ${mla.kvLatent}${mla.qLatent ? `, q ${mla.qLatent}` : ""}, rope ${mla.rope})` : "";
}

/**
 * ", Mamba2 in 8 of 10 layers (16 heads of 64, state 64, chunks of 64)" for a model with Mamba2
 * layers, ", Mamba3 SISO with complex RoPE in 6 of 8 layers (…)" (or "MIMO rank 4", "no RoPE",
 * "with conv") for Mamba3, else "".
 */
function mambaLayersOf(m: ModelConfig): string {
  const mamba = mambaOf(m);
  if (!mamba) return "";
  const m3 = mamba3Of(m);
  const kind = m3 ? `Mamba3 ${m3.mimoRank > 0 ? `MIMO rank ${m3.mimoRank}` : "SISO"}${m3.rope ? " with complex RoPE" : ", no RoPE"}${m3.useConv ? ", with conv" : ""}` : "Mamba2";
  return `, ${kind} in ${mamba.layers.size} of ${m.numLayers} layers (${mamba.heads} heads of ${mamba.headDim}, state ${mamba.stateSize}, chunks of ${mamba.chunkSize})`;
}

/** ", 4 experts (top 2, shared expert)" for a mixture-of-experts model, else "". */
function expertsOf(m: ModelConfig): string {
  const moe = moeOf(m);
  return moe ? `, ${moe.numExperts} experts (top ${moe.topK}${moe.shared ? ", shared expert" : ""})` : "";
}
