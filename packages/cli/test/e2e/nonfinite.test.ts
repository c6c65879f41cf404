import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A learning rate of 30 without clipping sends the tiny model's loss to NaN within a
// few steps. By default the run stops there with a TrainingError and every checkpoint
// on disk holds finite weights; with --on-nonfinite skip it skips such steps and goes on.
const DIVERGING = { learning_rate: 30, grad_clip: 0, save_interval: 2, max_steps: 8, log_interval: 1 };

/** Non-finite f32 values across every tensor of a checkpoint (all of kiln's f32 checkpoints' tensors). */
async function nonFiniteValues(file: string): Promise<number> {
  const { tensors, metadata } = await readCheckpoint(file);
  expect(metadata["kiln.dtype"] ?? "f32").toBe("f32");
  let bad = 0;
  for (const bytes of tensors.values()) {
    const f = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    for (const x of f) if (!Number.isFinite(x)) bad++;
  }
  return bad;
}

describe("kiln train when the loss goes NaN", () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await Workspace.create("nonfinite");
    await ws.writeConfig("diverge.yaml", { trainer: DIVERGING });
    await ws.writeTokens("data.bin", textTokens(2000));
  });
  afterAll(() => ws?.remove());

  it("stops with the step, the last finite loss and what to try; checkpoints stay finite", async () => {
    const r = await ws.run(["train", "-f", "diverge.yaml", "-d", "data.bin", "--output-dir", "stop", "--headless"]);
    const step = Number(/became NaN or infinite at step (\d+)/.exec(r.stderr)?.[1]);
    expect(step, r.stderr).toBeGreaterThan(2);
    // Training had started, so stdout holds the log lines of the finite steps: check the error by hand.
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).not.toMatch(/internal error/);
    expect(r.stderr).toMatch(new RegExp(`^kiln: TrainingError in diverge\\.yaml \\(step ${step}\\): the loss or the gradients became NaN or infinite at step ${step}; the last finite loss was [\\d.]+ at step ${step - 1}$`, "m"));
    expect(r.stderr).toMatch(/what to do: lower the learning rate \(now 30\).*--on-nonfinite skip.*checkpoints up to step \d+ in stop are untouched/);
    const saved = await stepCheckpoints(ws.path("stop"));
    expect(saved.length).toBeGreaterThan(0);
    for (const c of saved) {
      expect(c.step).toBeLessThan(step);
      expect(await nonFiniteValues(c.file), c.file).toBe(0);
    }
    expect(existsSync(ws.path("stop", "final.safetensors"))).toBe(false);
  });

  it("with --on-nonfinite skip, logs the skipped steps and finishes with finite weights", async () => {
    const r = expectSuccess(
      await ws.run(["train", "-f", "diverge.yaml", "-d", "data.bin", "--output-dir", "skip", "--headless", "--on-nonfinite", "skip"]),
      "training with --on-nonfinite skip",
    );
    const lines = (await readFile(ws.path("skip", "metrics.jsonl"), "utf8")).trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const skipped = lines.filter((l) => l.skipped === true);
    expect(skipped.length, r.stdout).toBeGreaterThan(0);
    for (const l of skipped) expect(l.nonfinite).toBe(true);
    for (const c of await stepCheckpoints(ws.path("skip"))) expect(await nonFiniteValues(c.file), c.file).toBe(0);
    expect(await nonFiniteValues(ws.path("skip", "final.safetensors"))).toBe(0);
  });

  it("accepts trainer.on_nonfinite in the config and refuses other values", async () => {
    await ws.writeConfig("bad-policy.yaml", { trainer: { ...DIVERGING, on_nonfinite: "ignore" } });
    const r = await ws.run(["train", "-f", "bad-policy.yaml", "-d", "data.bin", "--output-dir", "bad", "--headless"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/trainer\.on_nonfinite/);
    expect(r.stderr).toMatch(/stop.*skip/);
  });
});
