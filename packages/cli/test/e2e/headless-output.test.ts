import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type KilnResult, jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// --headless: stdout is JSON lines only (one per logged step, plus val_loss lines), and
// metrics.jsonl in the output folder holds the same lines.
const TRAINING_KEYS = ["step", "loss", "grad_norm", "learning_rate", "epoch", "it/s", "tokens/s", "mfu", "mem_bytes", "peak_rss_bytes"];

let ws: Workspace;
let run: KilnResult;
beforeAll(async () => {
  ws = await Workspace.create("headless");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 5, log_interval: 1, eval_interval: 2, eval_iters: 2 } });
  await ws.writeTokens("data.bin", textTokens(3000));
  run = expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "headless training");
});
afterAll(() => ws.remove());

describe("kiln train --headless", () => {
  it("prints only JSON lines on stdout, with every training key", () => {
    const lines = jsonLines(run.stdout);
    const training = lines.filter((l) => "loss" in l);
    expect(training.map((l) => l.step)).toEqual([1, 2, 3, 4, 5]);
    for (const l of training) {
      expect(Object.keys(l).sort()).toEqual([...TRAINING_KEYS].sort());
      for (const key of TRAINING_KEYS.filter((k) => k !== "mfu")) {
        expect(typeof l[key], key).toBe("number");
        expect(Number.isFinite(l[key]), key).toBe(true);
      }
      expect(l.mfu === null || typeof l.mfu === "number").toBe(true);
      if (typeof l.mfu === "number") {
        expect(l.mfu).toBeGreaterThanOrEqual(0);
        expect(l.mfu).toBeLessThanOrEqual(1);
      }
      expect(l.loss as number).toBeGreaterThan(0);
      expect(l.mem_bytes as number).toBeGreaterThan(0);
      expect(l["tokens/s"] as number).toBeGreaterThan(0);
      // The process's peak RSS holds at least the device arena (the wasm memory is part of it).
      expect(l.peak_rss_bytes as number).toBeGreaterThan(l.mem_bytes as number);
    }
    const peaks = training.map((l) => l.peak_rss_bytes as number);
    expect(peaks).toEqual([...peaks].sort((a, b) => a - b));
  });

  it("prints val_loss lines separately, at the evaluation interval and the last step", () => {
    const val = jsonLines(run.stdout).filter((l) => "val_loss" in l);
    expect(val.map((l) => l.step)).toEqual([2, 4, 5]);
    for (const l of val) {
      expect(Object.keys(l).sort()).toEqual(["step", "val_loss"]);
      expect(l.val_loss as number).toBeGreaterThan(0);
    }
    expect(jsonLines(run.stdout).every((l) => "loss" in l || "val_loss" in l)).toBe(true);
  });

  it("keeps the banner and progress messages off stdout", () => {
    // The first run on a machine measures the CPU's peak (for MFU) before the banner.
    expect(run.stderr).toMatch(/^(measuring this CPU's peak FLOP\/s once \(.*\)\n)?kiln train tiny\.yaml\n/);
    expect(run.stderr).toContain("wrote out/final.safetensors");
    expect(run.stdout).not.toMatch(/kiln train|saved|wrote/);
  });

  it("writes the same lines to metrics.jsonl", async () => {
    expect(await readFile(ws.path("out", "metrics.jsonl"), "utf8")).toBe(run.stdout);
  });
});

describe("kiln -f <config> without a subcommand", () => {
  it("trains, as kiln train -f does", async () => {
    const bare = expectSuccess(await ws.run(["-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "bare", "--headless", "--max-steps", "2", "--log-interval", "1"]), "bare -f");
    expect(jsonLines(bare.stdout).filter((l) => "loss" in l).map((l) => l.step)).toEqual([1, 2]);
  });
});
