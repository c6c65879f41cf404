import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { resolveModelConfig } from "../src/model/architectures.js";
import { paramRuns } from "../src/model/param-runs.js";
import { Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { StepProfiler, type ProfiledStep, describeKernelArgs, kernelCost } from "../src/exec/step-profiler.js";
import { summarizeProfile } from "../src/exec/profile-summary.js";

const config = (arch: "gpt2" | "llama"): TrainerConfig => ({
  model: resolveModelConfig({ arch, vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, maxSeqLen: 8, ...(arch === "llama" ? { kvHeads: 2, intermediateSize: 32 } : {}) }),
  batchSize: 2,
  seqLen: 8,
  optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
  schedule: { kind: "cosine", peak: 3e-3, min: 3e-4, warmupSteps: 2, maxSteps: 8 },
  seed: 7,
});

const batchAt = (step: number) => {
  const ids = Int32Array.from({ length: 16 }, (_, i) => (i * 5 + step * 3) % 24);
  const targets = Int32Array.from({ length: 16 }, (_, i) => (i * 5 + step * 3 + 1) % 24);
  return { ids, targets };
};

/** Two micro-batches per step, handed out one at a time as the CLI's prefetcher does. */
const source = (step: number) => {
  let i = 0;
  return { count: 2, next: async () => batchAt(2 * step + i++) };
};

/** Every event lies inside its step, in order, and none overlaps another. */
function expectOrderedAndDisjoint(s: ProfiledStep): void {
  const events = [...s.kernels, ...s.data].sort((a, b) => a.start - b.start);
  let at = s.start;
  for (const e of events) {
    expect(e.start).toBeGreaterThanOrEqual(at);
    expect(e.end).toBeGreaterThanOrEqual(e.start);
    at = e.end;
  }
  expect(s.end).toBeGreaterThanOrEqual(at);
}

describe.each(["gpt2", "llama"] as const)("%s step profile", (arch) => {
  it("records the armed steps only, and leaves the training itself unchanged", async () => {
    const plain = new Trainer(createReferenceBackend(), config(arch));
    const profiler = new StepProfiler();
    const profiled = new Trainer(createReferenceBackend(), { ...config(arch), profiler });
    for (let step = 0; step < 4; step++) {
      profiler.armed = step === 1 || step === 2;
      const [a, b] = [await plain.step(source(step)), await profiled.step(source(step))];
      expect(b.loss).toBe(a.loss);
      expect(b.gradNorm).toBe(a.gradNorm);
    }
    // Numbered as the logs number them: the second and third steps.
    expect(profiler.steps.map((s) => s.step)).toEqual([2, 3]);
  });

  it("sums per region and per kernel to the step time", async () => {
    const profiler = new StepProfiler();
    profiler.armed = true;
    const trainer = new Trainer(createReferenceBackend(), { ...config(arch), profiler });
    for (let step = 0; step < 3; step++) await trainer.step(source(step));
    for (const s of profiler.steps) expectOrderedAndDisjoint(s);
    const summary = summarizeProfile(profiler.steps);
    const sum = (rows: { ms: number }[]) => rows.reduce((t, r) => t + r.ms, 0);
    expect(summary.regions.map((r) => r.name)).toEqual(["forward", "backward", "optimizer", "data", "idle"]);
    expect(sum(summary.regions)).toBeCloseTo(summary.stepMs, 9);
    expect(sum(summary.kernels)).toBeCloseTo(summary.stepMs, 9);
    expect(summary.regions.reduce((t, r) => t + r.share, 0)).toBeCloseTo(1, 9);
    for (const r of [...summary.regions, ...summary.kernels]) expect(r.ms).toBeGreaterThanOrEqual(0);

    // Every node of the compiled step once per micro-batch, in its region; the optimizer's kernels outside it.
    const [first] = profiler.steps;
    const nodes = (trainer as unknown as { compiled: { graph: { nodes: { backward: boolean }[] } } }).compiled.graph.nodes;
    expect(first.kernels.filter((k) => k.region === "forward")).toHaveLength(2 * nodes.filter((n) => !n.backward).length);
    expect(first.kernels.filter((k) => k.region === "backward")).toHaveLength(2 * nodes.filter((n) => n.backward).length);
    expect(first.kernels.filter((k) => k.kernel === "adamW")).toHaveLength(paramRuns([trainer.layout], (a, b) => a.decay === b.decay).length);
    expect(first.data.filter((d) => d.name === "next batch")).toHaveLength(2);
    // FLOPs are the contract's: matmuls counted, element-wise kernels not.
    const matmul = summary.kernels.find((k) => k.name === "matmul")!;
    expect(matmul.gflops).toBeGreaterThan(0);
    expect(summary.kernels.find((k) => k.name === "adamW")!.gflops).toBeNull();
  });

  it("waits for the device after each forward and backward kernel when given a synchronize", async () => {
    let waits = 0;
    const profiler = new StepProfiler(undefined, async () => void waits++);
    profiler.armed = true;
    const trainer = new Trainer(createReferenceBackend(), { ...config(arch), profiler });
    await trainer.step(source(0));
    const [s] = profiler.steps;
    const passes = s.kernels.filter((k) => k.region !== "optimizer").length;
    // One wait per forward/backward kernel, and one after each stretch of optimizer kernels.
    expect(waits).toBeGreaterThan(passes);
    expectOrderedAndDisjoint(s);
  });
});

/**
 * A stand-in device timer: each mark's time is what `clock` says when the mark is
 * read back, so a test decides what the device "measured" for every call.
 */
function fakeTimer(clock: (markIndex: number) => number) {
  let marks = 0;
  let reads = 0;
  return {
    reads: () => reads,
    timer: {
      mark: () => void marks++,
      read: async () => {
        reads++;
        const times = Float64Array.from({ length: marks }, (_, i) => clock(i) - clock(0));
        marks = 0;
        return times;
      },
    },
  };
}

describe("StepProfiler with a device timer", () => {
  it("makes each call's time the device's, between the two marks around it, without waiting after each call", async () => {
    // Call i (0-based) runs on the device from 10 i to 10 i + 1 + i % 3 ms after the step's first mark.
    const fake = fakeTimer((mark) => 10 * Math.floor(mark / 2) + (mark % 2 === 1 ? 1 + (Math.floor(mark / 2) % 3) : 0));
    let waits = 0;
    const profiler = new StepProfiler(undefined, undefined, fake.timer);
    const trainer = new Trainer(
      Object.assign(Object.create(createReferenceBackend()), { synchronize: async () => void waits++ }),
      { ...config("gpt2"), profiler },
    );
    await trainer.step(source(0)); // unarmed: no marks
    expect(fake.reads()).toBe(0);
    profiler.armed = true;
    const waitsBefore = waits;
    await trainer.step(source(1));
    expect(fake.reads()).toBe(1);
    // The trainer's own waits only (the step's end), none per kernel.
    expect(waits - waitsBefore).toBe(1);
    const [s] = profiler.steps;
    expect(s.kernels.length).toBeGreaterThan(20);
    s.kernels.forEach((k, i) => {
      expect(k.end - k.start, `call ${i} ${k.kernel}`).toBeCloseTo(1 + (i % 3), 9);
      expect(k.start - s.kernels[0].start).toBeCloseTo(10 * i, 9);
    });
  });

  it("reads a step's marks after marks left unread by a step that failed", async () => {
    const fake = fakeTimer((mark) => mark * mark);
    const profiler = new StepProfiler(undefined, undefined, fake.timer);
    profiler.armed = true;
    profiler.beginStep(1);
    profiler.time(() => {}, "add", "forward", { flops: 0, bytes: 8 });
    profiler.time(() => {}, "add", "forward", { flops: 0, bytes: 8 });
    // Step 1 fails before its marks are read; step 2's calls come after its four marks.
    profiler.beginStep(2);
    profiler.time(() => {}, "matmul", "forward", { flops: 2, bytes: 8 });
    await profiler.readDeviceTimes();
    profiler.endStep();
    const [s] = profiler.steps;
    expect(s.step).toBe(2);
    expect(s.kernels).toHaveLength(1);
    // Its marks are the fifth and sixth: 5^2 - 4^2 ms.
    expect(s.kernels[0].end - s.kernels[0].start).toBe(9);
  });
});

describe("describeKernelArgs", () => {
  it("keeps a call's integer arguments, strings and true flags, in order, and leaves out buffers, fractions and AdamW's step", () => {
    const buffer = { buffer: { id: 1, byteLength: 64 }, byteOffset: 0 };
    expect(describeKernelArgs({ a: buffer, b: buffer, m: 8192, n: 2304, k: 768, transA: false, transB: true, alpha: 0.125, dtype: "bf16" })).toBe("m=8192 n=2304 k=768 transB dtype=bf16");
    expect(describeKernelArgs({ param: buffer, n: 4096, lr: 6e-4, beta1: 0.9, step: 12, weightDecay: 0, dtype: "f32" })).toBe("n=4096 weightDecay=0 dtype=f32");
  });
});

describe("summarizeProfile", () => {
  it("averages over steps and keeps data and idle apart", () => {
    const step = (start: number): ProfiledStep => ({
      step: start,
      start,
      end: start + 10,
      data: [{ name: "next batch", start, end: start + 1 }],
      kernels: [
        { kernel: "matmul", region: "forward", start: start + 1, end: start + 3, flops: 4e6, bytes: 1e6, args: "m=4 n=4 k=4" },
        { kernel: "matmul", region: "backward", start: start + 3, end: start + 7, flops: 8e6, bytes: 2e6, args: "m=8 n=4 k=4" },
        { kernel: "adamW", region: "optimizer", start: start + 8, end: start + 9, flops: 0, bytes: 5e6 },
      ],
    });
    const s = summarizeProfile([step(0), step(100)]);
    expect(s.stepMs).toBe(10);
    expect(Object.fromEntries(s.regions.map((r) => [r.name, r.ms]))).toEqual({ forward: 2, backward: 4, optimizer: 1, data: 1, idle: 2 });
    expect(s.kernels.map((k) => [k.name, k.ms, k.calls])).toEqual([
      ["matmul", 6, 2],
      ["adamW", 1, 1],
      ["outside kernels", 3, undefined],
    ]);
    expect(s.kernels[0].gflops).toBe(2); // 12e6 FLOPs in 6 ms
    expect(s.gflops).toBeCloseTo(1.2, 12);
    expect(s.kernels.map((k) => k.gbps)).toEqual([0.5, 5, null]); // 3e6 bytes in 6 ms, 5e6 in 1 ms
    expect(s.regions.map((r) => r.gbps)).toEqual([0.5, 0.5, 5, null, null]);
    // By shape: each matmul shape its own row, a call without arguments under its kernel's name.
    expect(s.shapes.map((r) => [r.name, r.ms, r.calls])).toEqual([
      ["matmul m=8 n=4 k=4", 4, 1],
      ["matmul m=4 n=4 k=4", 2, 1],
      ["adamW", 1, 1],
    ]);
  });
});

describe("kernelCost", () => {
  it("counts each named operand at its extent: inputs and outputs once, in-out operands twice, absent optional ones not at all", () => {
    const operand = { buffer: { id: 1, byteLength: 1 << 30 }, byteOffset: 0 };
    // A (3x5) and B (5x7) bf16 in, C (3x7) f32 accumulated: read and written.
    expect(kernelCost("matmul", { a: operand, b: operand, c: operand, m: 3, n: 7, k: 5, accumulate: true, dtype: "bf16", cDtype: "f32" })).toEqual({
      flops: 2 * 3 * 7 * 5,
      bytes: 2 * (15 + 35) + 2 * 4 * 21,
    });
    // With a bias (7 bf16) and C written only.
    expect(kernelCost("matmul", { a: operand, b: operand, c: operand, bias: operand, m: 3, n: 7, k: 5, dtype: "bf16" }).bytes).toBe(2 * (15 + 35 + 7 + 21));
    // AdamW on f32: param, m and v read and written, grad read; no master.
    expect(kernelCost("adamW", { param: operand, grad: operand, m: operand, v: operand, n: 10, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0, step: 1, dtype: "f32" })).toEqual({
      flops: 0,
      bytes: 4 * 10 * (2 + 1 + 2 + 2),
    });
  });

  it("a profiled step's kernels carry the bytes of their graph nodes' operands", async () => {
    const profiler = new StepProfiler();
    profiler.armed = true;
    const trainer = new Trainer(createReferenceBackend(), { ...config("gpt2"), profiler });
    await trainer.step(source(0));
    const [s] = profiler.steps;
    for (const k of s.kernels) expect(k.bytes, k.kernel).toBeGreaterThan(0);
    // The first layer norm of the forward pass, which adds the token and position embeddings first: both
    // (16 x 16 f32) in, their sum and y out, gamma and beta in, mean and rstd out.
    const norm = s.kernels.find((k) => k.kernel === "layerNormForward")!;
    expect(norm.bytes).toBe(4 * (4 * 256 + 16 + 16 + 16 + 16));
  });
});
