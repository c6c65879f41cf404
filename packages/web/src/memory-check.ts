import { planForwardMemory, planTrainingMemory, resolveRecompute } from "@kiln/core/browser";
import { formatBytes } from "./format-bytes.js";
import type { RunConfig } from "./run-config.js";

/** A run that does not fit the device, refused before anything is allocated (the CLI's message). */
export class PageMemoryError extends Error {
  constructor(
    message: string,
    readonly where: string,
    readonly hint: string,
  ) {
    super(message);
    this.name = "MemoryError";
  }
}

/** The bytes a run needs (training plus evaluation), from the memory plan; throws PageMemoryError when over `available`. */
export function checkMemory(c: RunConfig, deviceName: string, available: number): { need: number; description: string } {
  // The page trains on the CPU (WebAssembly): "auto" resolves as the CLI's does there.
  const recompute = resolveRecompute(c.recompute, c.model, c.batchSize, c.seqLen, "f32", { kind: "cpu", memoryBytes: available });
  const plan = planTrainingMemory(c.model, c.batchSize, c.seqLen, "f32", recompute);
  // kiln train's plan: evaluation runs between steps in the training arena when it fits.
  const evaluation = planForwardMemory(c.model, c.batchSize, c.seqLen, "f32", plan.activations);
  const need = plan.total + evaluation;
  if (need > available) {
    throw new PageMemoryError(`training needs ${formatBytes(need)} but ${deviceName} has ${formatBytes(available)}`, "config", `lower trainer.batch_size (now ${c.batchSize}) or trainer.seq_len (now ${c.seqLen}) and raise trainer.gradient_accumulation to keep tokens per step`);
  }
  const parts = [`parameters ${formatBytes(plan.parameters)}`, `gradients ${formatBytes(plan.gradients)}`, `AdamW ${formatBytes(plan.optimizerState)}`, `activations ${formatBytes(plan.activations)} (recompute: ${recompute}${c.recompute === "auto" ? ", auto" : ""})`, `evaluation ${formatBytes(evaluation)}`];
  return { need, description: `${formatBytes(need)} of ${formatBytes(available)} (${((100 * need) / available).toFixed(1)}%): ${parts.join(", ")}` };
}
