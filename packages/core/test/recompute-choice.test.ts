import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../src/model/architectures.js";
import { planForwardMemory, planTrainingMemory } from "../src/train/plan-training.js";
import { KEEP_ALL_SHARE, resolveRecompute } from "../src/train/recompute-choice.js";

// "auto" keeps every activation on a GPU where that plan (with evaluation's extra) fits in
// KEEP_ALL_SHARE of its memory, recomputes the element-wise outputs otherwise and on a CPU;
// any other setting stands.
const model = resolveModelConfig({ arch: "gpt2", vocabSize: 512, hiddenSize: 64, numLayers: 2, numHeads: 2, maxSeqLen: 128 });
const keepAll = planTrainingMemory(model, 4, 128, "bf16", "none", "gpu");
const needed = keepAll.total + planForwardMemory(model, 4, 128, "bf16", keepAll.activations);
const gpu = (memoryBytes: number) => ({ kind: "gpu" as const, memoryBytes });

describe("resolveRecompute", () => {
  it("keeps everything on a GPU exactly while that plan fills at most its share of the memory", () => {
    expect(resolveRecompute("auto", model, 4, 128, "bf16", gpu(80 * 2 ** 30))).toBe("none");
    expect(resolveRecompute("auto", model, 4, 128, "bf16", gpu(Math.ceil(needed / KEEP_ALL_SHARE)))).toBe("none");
    expect(resolveRecompute("auto", model, 4, 128, "bf16", gpu(Math.floor(needed / KEEP_ALL_SHARE) - 1))).toBe("cheap");
    // Keeping everything costs memory: the plan that recomputes is smaller.
    expect(planTrainingMemory(model, 4, 128, "bf16", "cheap", "gpu").activations).toBeLessThan(keepAll.activations);
  });

  it("recomputes the element-wise outputs on a CPU however much memory it has", () => {
    expect(resolveRecompute("auto", model, 4, 128, "bf16", { kind: "cpu", memoryBytes: 2 ** 40 })).toBe("cheap");
  });

  it("returns a named policy as it is", () => {
    for (const p of ["none", "cheap", "blocks"] as const) expect(resolveRecompute(p, model, 4, 128, "f32", gpu(1))).toBe(p);
  });
});
