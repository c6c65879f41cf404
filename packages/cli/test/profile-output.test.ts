import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { type ProfiledStep, StepProfiler, Trainer, resolveModelConfig, summarizeProfile } from "@kiln/core";
import { chromeTrace } from "../src/train/chrome-trace.js";
import { formatProfileTable } from "../src/train/profile-table.js";
import { traceProblems } from "./e2e/support/trace-format.js";

async function profiledSteps(count: number): Promise<ProfiledStep[]> {
  const profiler = new StepProfiler();
  profiler.armed = true;
  const trainer = new Trainer(createReferenceBackend(), {
    model: resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, kvHeads: 2, intermediateSize: 32, maxSeqLen: 8 }),
    batchSize: 2,
    seqLen: 8,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 10 },
    seed: 1,
    profiler,
  });
  const batch = { ids: Int32Array.from({ length: 16 }, (_, i) => i % 24), targets: Int32Array.from({ length: 16 }, (_, i) => (i + 1) % 24) };
  for (let s = 0; s < count; s++) {
    let i = 0;
    await trainer.step({ count: 2, next: async () => (i++, batch) });
  }
  trainer.dispose();
  return profiler.steps;
}

describe("the Chrome trace of a profile", () => {
  it("is valid Trace Event Format with steps, regions and kernels nested", async () => {
    const steps = await profiledSteps(2);
    const trace = chromeTrace(steps, 42);
    expect(traceProblems(JSON.parse(JSON.stringify(trace)))).toEqual([]);
    const complete = trace.traceEvents.filter((e) => e.ph === "X");
    expect(complete.filter((e) => e.cat === "step").map((e) => e.name)).toEqual(["step 1", "step 2"]);
    // Two micro-batches: forward, backward, forward, backward, then the optimizer, per step (gradient zeroing first).
    const regions = complete.filter((e) => e.cat === "region").map((e) => e.name);
    expect(regions.slice(0, 6)).toEqual(["optimizer", "forward", "backward", "forward", "backward", "optimizer"]);
    const kernels = complete.filter((e) => e.cat === "forward" || e.cat === "backward" || e.cat === "optimizer");
    expect(kernels).toHaveLength(steps.reduce((t, s) => t + s.kernels.length, 0));
    expect(complete.filter((e) => e.cat === "data").map((e) => e.name)).toContain("next batch");
    expect(kernels.find((e) => e.name === "matmul")!.args).toEqual({ flops: expect.any(Number), bytes: expect.any(Number) });
    expect(kernels.find((e) => e.name === "adamW")!.args).toEqual({ bytes: expect.any(Number) });
  });

  it("is refused by the checker when a child outlives its parent", () => {
    const base = { ph: "X", pid: 1, tid: 1 } as const;
    const bad = { traceEvents: [{ ...base, name: "step", ts: 0, dur: 10 }, { ...base, name: "kernel", ts: 5, dur: 10 }] };
    expect(traceProblems(bad)).toEqual([expect.stringMatching(/kernel.*ends after it/)]);
    expect(traceProblems({ traceEvents: [{ ...base, name: "x", ts: 0 }] })).toEqual([expect.stringMatching(/without a dur/)]);
    expect(traceProblems({ events: [] })).toEqual(["no traceEvents array"]);
  });
});

describe("the profile table", () => {
  it("has a row per region and per kernel, each table totalling the step time", async () => {
    const summary = summarizeProfile(await profiledSteps(2));
    const text = formatProfileTable(summary, { measuredStepMs: summary.stepMs, device: "reference", synchronized: false });
    const section = (title: string) => {
      const lines = text.split("\n");
      const start = lines.findIndex((l) => l.startsWith(title));
      const end = lines.findIndex((l, i) => i > start && l.startsWith("total"));
      return { rows: lines.slice(start + 1, end), total: Number(lines[end].split(/\s+/)[1]) };
    };
    const regions = section("region");
    expect(regions.rows.map((l) => l.split(/\s+/)[0])).toEqual(["forward", "backward", "optimizer", "data", "idle"]);
    const kernels = section("kernel");
    expect(kernels.rows.at(-1)).toMatch(/^outside kernels/);
    for (const { rows, total } of [regions, kernels]) {
      const ms = rows.map((l) => Number(/\s(\d+\.\d+)\s+\d+\.\d%/.exec(l)![1]));
      // Rows are printed to 0.01 ms: their sum is the total up to that rounding.
      expect(Math.abs(ms.reduce((t, v) => t + v, 0) - total)).toBeLessThanOrEqual(0.005 * rows.length + 1e-9);
      expect(total).toBeCloseTo(summary.stepMs, 2);
    }
    expect(text).toContain("the table sums to 100.0% of it");
    // GB/s from the operand bytes: the kernels' column holds a figure, "outside kernels" none.
    const head = text.split("\n").find((l) => l.startsWith("kernel"))!.split(/\s+/);
    const gbps = head.indexOf("GB/s");
    expect(gbps).toBeGreaterThan(0);
    const column = (row: string) => row.split(/\s+/)[gbps + (row.startsWith("outside kernels") ? 1 : 0)];
    for (const row of kernels.rows) expect(column(row), row).toMatch(row.startsWith("outside kernels") ? /^-$/ : /^\d+\.\d$/);
  });
});
