import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";
import { constantLrConfig } from "./support/trainer-config.js";

const model = resolveModelConfig({ arch: "gpt2", vocabSize: 32, hiddenSize: 16, numLayers: 1, numHeads: 2, maxSeqLen: 8 });

/** Micro-batch i: 16 rows, the first i % 5 targets ignored, so each has its own count of valid rows. */
const batches = Array.from({ length: 17 }, (_, i) => ({
  ids: Int32Array.from({ length: 16 }, (_, r) => (r * 7 + i) % 32),
  targets: Int32Array.from({ length: 16 }, (_, r) => (r < i % 5 ? -1 : (r * 5 + 3 * i) % 32)),
}));
const valid = (b: (typeof batches)[number]) => b.targets.filter((t) => t >= 0).length;

function trainer() {
  return new Trainer(createReferenceBackend(), constantLrConfig(model, 2, 8, 2));
}

describe("a step's loss over many micro-batches, read back after the device has run them all", () => {
  it("17 micro-batches (more than the 14 loss slots): the mean over every valid target, and the mean of the micro-batches' means from a source", async () => {
    // Each micro-batch's mean loss with the same weights (no update in between).
    const t0 = trainer();
    const means: number[] = [];
    for (const b of batches) means.push(await t0.lossAndGradients(b));
    t0.dispose();
    const totalValid = batches.reduce((s, b) => s + valid(b), 0);
    const overTargets = means.reduce((s, m, i) => s + m * valid(batches[i]), 0) / totalValid;
    const ofMeans = means.reduce((s, m) => s + m, 0) / batches.length;
    expect(Math.abs(overTargets - ofMeans)).toBeGreaterThan(1e-6);

    const t1 = trainer();
    expect((await t1.step(batches)).loss).toBeCloseTo(overTargets, 10);
    t1.dispose();
    const t2 = trainer();
    let i = 0;
    expect((await t2.step({ count: batches.length, next: async () => batches[i++] })).loss).toBeCloseTo(ofMeans, 10);
    t2.dispose();
  });
});
