import { readdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Flags set their config keys in a real run: the spellings users bring, and keys that had no flag.
let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("setting-flags");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 3, save_interval: 1, max_checkpoints: 1 } });
  await ws.writeTokens("data.bin", textTokens(2000));
});
afterAll(() => ws.remove());

describe("kiln train with setting flags", () => {
  it("takes --learning-rate and --lr-schedule, keeps trainer.max_checkpoints, warns about a warmup longer than the run", async () => {
    const r = expectSuccess(
      await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--learning-rate", "0.01", "--lr-schedule", "constant"]),
      "training with --learning-rate",
    );
    const lrs = jsonLines(r.stdout).filter((l) => "loss" in l).map((l) => l.learning_rate);
    expect(lrs).toEqual([0.01, 0.01, 0.01]);
    // trainer.max_checkpoints: 1 from the file keeps only the newest step checkpoint.
    expect((await readdir(ws.path("out"))).filter((n) => n.startsWith("step_"))).toEqual(["step_3.safetensors"]);
    expect(r.stderr).not.toMatch(/warning: warmup/);

    const warm = expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "warm", "--headless", "--warmup-steps", "5", "--max-checkpoints", "2"]), "training with a long warmup");
    expect(warm.stderr).toContain("warning: warmup_steps (5) >= the 3 steps this run trains for: the learning rate never reaches trainer.learning_rate and never decays");
    expect((await readdir(ws.path("warm"))).filter((n) => n.startsWith("step_")).sort()).toEqual(["step_2.safetensors", "step_3.safetensors"]);
  });
});
