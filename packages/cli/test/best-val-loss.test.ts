import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { trainOptions } from "../src/commands/train.js";
import { BestValLoss, parseConfigText, resolveSettings } from "@kiln/core";
import { settingOverrides } from "../src/config/setting-flags.js";

describe("BestValLoss", () => {
  it("marks each lower val_loss and stops after `patience` evaluations without one", () => {
    const b = new BestValLoss(2);
    expect(b.record(10, 3.0)).toEqual({ improved: true, stop: false });
    expect(b.record(20, 2.5)).toEqual({ improved: true, stop: false });
    expect(b.record(30, 2.5)).toEqual({ improved: false, stop: false }); // equal is no improvement
    expect(b.record(40, 2.4)).toEqual({ improved: true, stop: false });
    expect(b.record(50, 2.6)).toEqual({ improved: false, stop: false });
    expect(b.record(60, 2.7)).toEqual({ improved: false, stop: true });
    expect(b.stopLine(60)).toBe("early stop at step 60: val_loss has not improved on 2.4000 (step 40) for 2 evaluations");
  });

  it("goes on counting from a checkpoint's metadata; without patience it never stops", () => {
    const b = new BestValLoss(3);
    b.record(5, 1.5);
    b.record(10, 1.75);
    const resumed = new BestValLoss(3, b.metadata());
    expect(resumed.record(15, 1.6)).toEqual({ improved: false, stop: false });
    expect(resumed.record(20, 1.6)).toEqual({ improved: false, stop: true });
    const never = new BestValLoss(undefined);
    for (let i = 0; i < 10; i++) expect(never.record(i, 5 + i).stop).toBe(false);
    expect(new BestValLoss(1).metadata()).toEqual({});
  });
});

describe("--save-best and --early-stop", () => {
  const config = "model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }\ntrainer: { max_steps: 4 }\n";
  const settingsFor = (args: string[], text = config) => {
    const cmd = trainOptions(new Command("train")).exitOverride().configureOutput({ writeErr: () => {} });
    cmd.parse(["-f", "tiny.yaml", ...args], { from: "user" });
    return resolveSettings(parseConfigText(text, "tiny.yaml"), settingOverrides("train", cmd.opts()));
  };

  it("set trainer.save_best and trainer.early_stop, as the YAML keys do", () => {
    expect(settingsFor([])).toMatchObject({ saveBest: false, earlyStop: undefined });
    expect(settingsFor(["--save-best", "--early-stop", "3"])).toMatchObject({ saveBest: true, earlyStop: 3 });
    expect(settingsFor(["--early-stopping-patience", "2"]).earlyStop).toBe(2);
    expect(settingsFor([], `${config.trimEnd().slice(0, -1)}, save_best: true, early_stop: 5 }\n`)).toMatchObject({ saveBest: true, earlyStop: 5 });
  });

  it("refuses an --early-stop that is not a positive integer", () => {
    expect(() => settingsFor(["--early-stop", "0"])).toThrow(/expected an integer > 0 \(as trainer\.early_stop takes\), got "0"/);
  });
});
