import { describe, expect, it, vi } from "vitest";
import { createReferenceBackend } from "@kiln/contract";

// Counts the training plans made, through the module every planner goes through.
const plans = vi.hoisted(() => ({ count: 0 }));
vi.mock("../src/train/plan-training.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../src/train/plan-training.js")>();
  return {
    ...original,
    planTraining: (...args: Parameters<typeof original.planTraining>) => {
      plans.count++;
      return original.planTraining(...args);
    },
  };
});

const { BatchSampler, TrainingRun, parseConfigText, resolveSettings } = await import("../src/index.js");

const CONFIG = "model: { arch: gpt2, vocab_size: 64, hidden_size: 8, num_layers: 1, num_heads: 2, max_seq_len: 8 }\ntrainer: { max_steps: 2, batch_size: 2, eval_interval: 1, eval_iters: 1, log_interval: 1 }\n";

function memoryData(seqLen: number) {
  const tokens = Int32Array.from({ length: 512 }, (_, i) => (i * 7) % 64);
  const dataset = { path: "memory", format: "u32", tokenCount: tokens.length, sidecar: undefined, read: async (start: number, count: number, into: Int32Array) => into.set(tokens.subarray(start, start + count)), close: async () => {} };
  const common = { batchSize: 2, seqLen, seed: 1, valFraction: 0.25 };
  return { train: new BatchSampler(dataset as never, { ...common, split: "train" }), val: new BatchSampler(dataset as never, { ...common, split: "val", shuffle: false }) };
}

describe("a training run", () => {
  it("is planned once, and its trainer builds from that plan", async () => {
    const settings = resolveSettings(parseConfigText(CONFIG, "tiny.yaml"));
    const backend = createReferenceBackend();
    plans.count = 0;
    const run = new TrainingRun({ settings, backend, dtype: "f32", data: memoryData(settings.seqLen) });
    expect(plans.count).toBe(1);
    expect(run.trainer.memoryPlan).toBe(run.plan.training.memory);
    const reports = [];
    while (!run.done) reports.push(await run.step());
    expect(reports.map((r) => r.step)).toEqual([1, 2]);
    expect(reports.every((r) => r.window !== undefined && r.eval !== undefined)).toBe(true);
    expect(plans.count).toBe(1);
    await run.dispose();
  });

  it("refuses a run the device cannot hold before allocating, saying what to lower", () => {
    const settings = resolveSettings(parseConfigText(CONFIG, "tiny.yaml"));
    const backend = createReferenceBackend();
    const small = { ...backend, capabilities: () => ({ ...backend.capabilities(), device: { ...backend.capabilities().device, memoryBytes: 1024 } }) };
    expect(() => new TrainingRun({ settings, backend: small as never, dtype: "f32", data: memoryData(settings.seqLen) })).toThrow(/training needs .* but .* has 1\.00 KiB/);
  });
});
