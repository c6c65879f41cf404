import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { trainOptions } from "../src/commands/train.js";
import { OTHER_NAMES } from "../src/config/other-names.js";
import { parseConfigText } from "../src/config/load-config.js";
import { dataSchema, trainerSchema } from "../src/config/schema.js";
import { resolveSettings } from "../src/config/settings.js";
import { SETTING_FLAGS, settingParser, spellingsOf } from "../src/config/setting-flags.js";
import { warmupWarning } from "../src/config/schedule-warnings.js";

const CONFIG = `model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }
trainer: { max_steps: 4, learning_rate: 0.003 }
`;

/** The settings `kiln train -f tiny.yaml <args>` would run with (flags parsed by the real train command, nothing run). */
function settingsFor(args: string[]) {
  const cmd = trainOptions(new Command("train")).exitOverride();
  cmd.parse(["-f", "tiny.yaml", ...args], { from: "user" });
  return resolveSettings({ path: "tiny.yaml", text: CONFIG, config: parseConfigText(CONFIG, "tiny.yaml"), ignoredKeys: [] }, cmd.opts());
}

describe("the setting flags table", () => {
  it("gives every trainer and data key a flag (dtype and tf32 have their own)", () => {
    const keys = new Set(SETTING_FLAGS.map((s) => s.key));
    const ownFlags = new Set(["trainer.dtype", "trainer.tf32"]);
    const expected = [...Object.keys(trainerSchema.shape).map((k) => `trainer.${k}`), ...Object.keys(dataSchema.shape).map((k) => `data.${k}`)];
    expect(expected.filter((k) => !keys.has(k as never) && !ownFlags.has(k))).toEqual([]);
  });

  it("names only keys the schema has, each once, with no spelling used twice", () => {
    for (const s of SETTING_FLAGS) expect(() => settingParser(s.key)).not.toThrow();
    expect(new Set(SETTING_FLAGS.map((s) => s.key)).size).toBe(SETTING_FLAGS.length);
    const spellings = SETTING_FLAGS.flatMap(spellingsOf);
    expect(new Set(spellings).size).toBe(spellings.length);
  });

  it("answers other trainers' names with keys kiln has, none of them a kiln spelling itself", () => {
    const kilnKeys = new Set([...Object.keys(trainerSchema.shape), ...Object.keys(dataSchema.shape)]);
    for (const [name, key] of Object.entries(OTHER_NAMES)) {
      expect(kilnKeys.has(name), name).toBe(false);
      expect(key, name).toMatch(/^(model|trainer|data)\.\w+$/);
    }
    // A name that is also a kiln flag (--lr, --output-dir) is that flag's key.
    for (const s of SETTING_FLAGS) {
      for (const spelling of spellingsOf(s)) {
        const name = spelling.replace(/^--/, "").replace(/-/g, "_");
        if (name in OTHER_NAMES) expect(OTHER_NAMES[name], spelling).toBe(s.key);
      }
    }
  });
});

describe("settingParser", () => {
  it("reads a flag's text as the YAML key would", () => {
    expect(settingParser("trainer.learning_rate")("3e-4")).toBe(3e-4);
    expect(settingParser("trainer.batch_size")("16")).toBe(16);
    expect(settingParser("trainer.lr_schedule")("linear")).toBe("linear");
    expect(settingParser("trainer.checkpoint_dir")("2024")).toBe("2024");
  });

  it("refuses what the key refuses, saying what it takes", () => {
    expect(() => settingParser("trainer.batch_size")("0")).toThrow('expected an integer > 0 (as trainer.batch_size takes), got "0"');
    expect(() => settingParser("trainer.batch_size")("2.5")).toThrow('expected an integer > 0 (as trainer.batch_size takes), got "2.5"');
    expect(() => settingParser("trainer.beta2")("1")).toThrow('expected a number >= 0 and < 1 (as trainer.beta2 takes), got "1"');
    expect(() => settingParser("trainer.lr_schedule")("cosin")).toThrow('expected one of cosine, linear, constant (as trainer.lr_schedule takes), got "cosin"');
  });
});

describe("flags over the config file", () => {
  it("keeps the file's values without flags", () => {
    const s = settingsFor([]);
    expect(s).toMatchObject({ lr: 0.003, maxSteps: 4, saveInterval: 500, maxCheckpoints: 5, outputDir: "checkpoints/tiny" });
  });

  it("takes the spellings users bring as aliases", () => {
    expect(settingsFor(["--learning-rate", "0.01"]).lr).toBe(0.01);
    expect(settingsFor(["--lr", "0.02"]).lr).toBe(0.02);
    expect(settingsFor(["--save-interval", "7"]).saveInterval).toBe(7);
    expect(settingsFor(["--num-epochs", "2"]).numEpochs).toBe(2);
    expect(settingsFor(["--epochs", "3"]).numEpochs).toBe(3);
    expect(settingsFor(["--gradient-accumulation", "4"]).gradAccum).toBe(4);
    expect(settingsFor(["--checkpoint-dir", "runs/a"]).outputDir).toBe("runs/a");
  });

  it("sets keys that had no flag before: max_checkpoints, warmup, AdamW, eval_iters", () => {
    const s = settingsFor(["--max-checkpoints", "2", "--warmup-steps", "3", "--weight-decay", "0", "--beta2", "0.99", "--eval-iters", "5", "--lr-schedule", "constant"]);
    expect(s).toMatchObject({ maxCheckpoints: 2, warmupSteps: 3, weightDecay: 0, beta2: 0.99, evalIters: 5, schedule: "constant" });
  });

  it("names the flag, not the file's key, when a flag's value breaks a rule across keys", () => {
    expect(() => settingsFor(["--seq-len", "32"])).toThrow(expect.objectContaining({ where: "tiny.yaml (--seq-len)" }));
  });

  it("reads trainer.max_checkpoints from the file", () => {
    const text = CONFIG.replace("max_steps: 4", "max_steps: 4, max_checkpoints: 1");
    expect(resolveSettings({ path: "t.yaml", text, config: parseConfigText(text, "t.yaml"), ignoredKeys: [] }).maxCheckpoints).toBe(1);
  });
});

describe("warmupWarning", () => {
  it("warns when warmup lasts the whole run or longer", () => {
    expect(warmupWarning(1000, 1000)).toMatch(/^warning: warmup_steps \(1000\) >= the 1000 steps this run trains for: the learning rate never reaches trainer\.learning_rate/);
    expect(warmupWarning(2000, 500)).toMatch(/lower trainer\.warmup_steps \(--warmup-steps\), e\.g\. to 50$/);
  });

  it("is quiet otherwise", () => {
    expect(warmupWarning(0, 10)).toBeUndefined();
    expect(warmupWarning(99, 100)).toBeUndefined();
  });
});
