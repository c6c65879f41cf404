import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KilnResult } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { traceProblems } from "./support/trace-format.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln train --profile N: steps 3..N+2 of the run are timed; the table goes to stderr
// (headless), profile.json and trace.json to the output folder, and training goes on.
let ws: Workspace;
let run: KilnResult;
beforeAll(async () => {
  ws = await Workspace.create("profile");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 6, log_interval: 1, eval_interval: 10 } });
  await ws.writeTokens("data.bin", textTokens(3000));
  run = expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--profile", "2"]), "profiled training");
});
afterAll(() => ws.remove());

interface ProfileFile {
  steps: number[];
  stepMs: number;
  measuredStepMs: number;
  regions: { name: string; ms: number; share: number }[];
  kernels: { name: string; ms: number; calls?: number }[];
}

describe("kiln train --profile", () => {
  it("times steps 3 and 4, writes profile.json whose rows sum to the step, and trains to the end", async () => {
    const profile = JSON.parse(await readFile(ws.path("out", "profile.json"), "utf8")) as ProfileFile;
    expect(profile.steps).toEqual([3, 4]);
    expect(profile.regions.map((r) => r.name)).toEqual(["forward", "backward", "optimizer", "data", "idle"]);
    expect(profile.regions.reduce((t, r) => t + r.ms, 0)).toBeCloseTo(profile.stepMs, 6);
    expect(profile.kernels.reduce((t, r) => t + r.ms, 0)).toBeCloseTo(profile.stepMs, 6);
    // The trainer's own span lies inside the wall time measured around trainer.step().
    expect(profile.measuredStepMs).toBeGreaterThanOrEqual(profile.stepMs);
    expect(profile.kernels.find((k) => k.name === "matmul")!.calls).toBeGreaterThan(0);
    expect(run.stderr).toMatch(/profile of steps 3-4 \(2 steps, means per step\)/);
    expect(run.stderr).toMatch(/^matmul\s+\d/m);
    expect(run.stdout.trim().split("\n").filter((l) => l.includes('"loss"'))).toHaveLength(6);
  });

  it("writes a trace.json in the Trace Event Format", async () => {
    const trace = JSON.parse(await readFile(ws.path("out", "trace.json"), "utf8")) as { traceEvents: { ph: string; cat?: string }[] };
    expect(traceProblems(trace)).toEqual([]);
    expect(trace.traceEvents.filter((e) => e.cat === "step")).toHaveLength(2);
  });

  it("refuses a count that is not a positive integer, naming the flag", async () => {
    const r = await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out2", "--profile", "0"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/--profile.*expected a positive integer, got "0"/);
  });
});
