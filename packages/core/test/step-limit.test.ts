import { describe, expect, it } from "vitest";
import { parseConfigText } from "../src/settings/config-text.js";
import { resolveSettings } from "../src/settings/run-settings.js";
import { stepLimit } from "../src/run/step-limit.js";

const MODEL = "model: { arch: gpt2, vocab_size: 64, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 8 }\n";
const settings = (trainer: string, flags: [string, unknown, string][] = []) =>
  resolveSettings(
    parseConfigText(`${MODEL}trainer: { ${trainer} }\n`, "run.yaml"),
    new Map(flags.map(([key, value, typed]) => [key, { value, from: typed.split(" ")[0], typed }])),
  );

describe("a run's step limit", () => {
  it("ends at whichever of max_steps and num_epochs comes first", () => {
    // 100 micro-batches an epoch, 2 accumulated a step: an epoch is 50 steps.
    expect(stepLimit(settings("max_steps: 80, num_epochs: 1, gradient_accumulation: 2"), 100)).toEqual({
      total: 50,
      decidedBy: "trainer.num_epochs",
      text: "50 (trainer.num_epochs in run.yaml: 1 epoch of 50 steps; before trainer.max_steps in run.yaml)",
    });
    expect(stepLimit(settings("max_steps: 30, num_epochs: 1, gradient_accumulation: 2"), 100)).toMatchObject({ total: 30, decidedBy: "trainer.max_steps" });
    expect(stepLimit(settings("num_epochs: 2.5"), 10)).toMatchObject({ total: 25, text: "25 (trainer.num_epochs in run.yaml: 2.5 epochs of 10 steps)" });
  });

  it("takes a limit from the command line over the file's, saying which it set aside", () => {
    const s = settings("max_steps: 2400", [["trainer.num_epochs", 1, "--num-epochs 1"]]);
    expect(s.maxSteps).toBeUndefined();
    expect(s.limitsSetAside).toEqual(["trainer.max_steps 2400"]);
    expect(stepLimit(s, 1857).text).toBe("1857 (--num-epochs 1: 1 epoch of 1857 steps; the config's trainer.max_steps 2400 set aside by the flag)");
    // Both on the command line: both count.
    const both = settings("max_steps: 2400", [["trainer.num_epochs", 1, "--num-epochs 1"], ["trainer.max_steps", 5, "--max-steps 5"]]);
    expect(stepLimit(both, 1857)).toMatchObject({ total: 5, decidedBy: "trainer.max_steps" });
    expect(both.limitsSetAside).toEqual([]);
  });
});
