import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { type ProfiledStep, StepProfiler, Trainer, resolveModelConfig, summarizeProfile } from "@kiln/core";
import { chromeTrace } from "../src/train/chrome-trace.js";
import { formatProfileTable } from "../src/train/profile-table.js";
import { StepProfiling } from "../src/train/step-profiling.js";
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
    expect(kernels.find((e) => e.name === "matmul")!.args).toEqual({ call: expect.stringMatching(/^m=\d+ n=\d+ k=\d+ .*dtype=f32/), flops: expect.any(Number), bytes: expect.any(Number) });
    expect(kernels.find((e) => e.name === "adamW")!.args).toEqual({ call: expect.stringMatching(/^n=\d+ /), bytes: expect.any(Number) });
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
    // The costliest call shapes, the call last: as many as there are, up to 15, most time first.
    const lines = text.split("\n");
    const shapesAt = lines.findIndex((l) => /costliest call shapes/.test(l));
    const shapeRows = lines.slice(shapesAt + 2);
    expect(shapeRows).toHaveLength(Math.min(15, summary.shapes.length));
    expect(shapeRows[0].trim().split(/\s+/).slice(5).join(" ")).toBe(summary.shapes[0].name);
    expect(summary.shapes.some((r) => /^matmul m=\d+ n=\d+ k=\d+/.test(r.name))).toBe(true);
  });

  it("says how kernel times were taken on a GPU: the device's timestamps, or a wait after each kernel", async () => {
    const summary = summarizeProfile(await profiledSteps(1));
    const table = (c: { synchronized: boolean; deviceTimed?: boolean }) => formatProfileTable(summary, { measuredStepMs: summary.stepMs, device: "gpu", ...c });
    expect(table({ synchronized: false, deviceTimed: true })).toMatch(/kernel times from the device's timestamps around each call/);
    expect(table({ synchronized: true })).toMatch(/measured with a device synchronize after every kernel/);
    expect(table({ synchronized: false })).not.toMatch(/timestamps|synchronize after/);
  });

  it("gives each kernel and call shape its roofline share (floor) when the device's peak and bandwidth are known", async () => {
    const summary = summarizeProfile(await profiledSteps(1));
    // A made-up device slow enough that the reference backend's calls sit near their floor.
    const c = { measuredStepMs: summary.stepMs, device: "gpu", synchronized: false, peakFlops: 2e9, memoryBandwidth: 4e9 };
    const text = formatProfileTable(summary, c);
    expect(text).toMatch(/floor: the calls' roofline time \(FLOPs at 0 TFLOP\/s, operand bytes at 4 GB\/s, the longer\) over their time/);
    const lines = text.split("\n");
    const head = lines.find((l) => l.startsWith("kernel"))!.split(/\s+/);
    const floor = head.indexOf("floor");
    expect(floor).toBeGreaterThan(0);
    const matmul = summary.kernels.find((r) => r.name === "matmul")!;
    const expected = Math.max((matmul.gflops! * 1e9) / c.peakFlops, (matmul.gbps! * 1e9) / c.memoryBandwidth);
    const row = lines.find((l) => l.startsWith("matmul "))!.split(/\s+/);
    expect(Number(row[floor].replace("%", ""))).toBeCloseTo(100 * expected, 1);
    // The shapes table has the column too; without the device's figures neither has it.
    expect(lines.find((l) => /^\s+ms\/step\s+share.*floor\s+call$/.test(l))).toBeDefined();
    expect(formatProfileTable(summary, { measuredStepMs: summary.stepMs, device: "gpu", synchronized: false })).not.toMatch(/floor/);
  });
});

describe("StepProfiling on a GPU backend", () => {
  const gpuBackend = (timer: boolean) => {
    const reference = createReferenceBackend();
    const capabilities = () => ({ ...reference.capabilities(), device: { ...reference.capabilities().device, kind: "gpu" as const } });
    return Object.assign(Object.create(reference), { capabilities, ...(timer ? { timer: { mark() {}, read: async () => new Float64Array() } } : {}) });
  };

  it("times kernels with the backend's timer when it has one, and waits after each kernel only when it has none", () => {
    const timed = new StepProfiling(3, 10, gpuBackend(true), "/tmp").profiler;
    expect(timed.timer).toBeDefined();
    expect(timed.synchronize).toBeUndefined();
    const waited = new StepProfiling(3, 10, gpuBackend(false), "/tmp").profiler;
    expect(waited.timer).toBeUndefined();
    expect(waited.synchronize).toBeDefined();
    const cpu = new StepProfiling(3, 10, createReferenceBackend(), "/tmp").profiler;
    expect([cpu.timer, cpu.synchronize]).toEqual([undefined, undefined]);
  });
});
