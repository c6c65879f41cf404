import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { ALL_SETTINGS, dataSchema, kilnKeyFor, parseConfigText, resolveSettings, trainerSchema } from "@kiln/core";
import { trainOptions } from "../src/commands/train.js";
import { settingOverrides, settingParser, spellingsOf } from "../src/config/setting-flags.js";
import { warmupWarning } from "../src/config/schedule-warnings.js";

const CONFIG = `model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }
trainer: { max_steps: 4, learning_rate: 0.003 }
`;

/** The settings `kiln train -f tiny.yaml <args>` would run with (flags parsed by the real train command, nothing run). */
function settingsFor(args: string[]) {
  const cmd = trainOptions(new Command("train")).exitOverride();
  cmd.parse(["-f", "tiny.yaml", ...args], { from: "user" });
  return resolveSettings(parseConfigText(CONFIG, "tiny.yaml"), settingOverrides("train", cmd.opts()));
}

const FLAGGED = ALL_SETTINGS.filter((s) => s.flag !== undefined);

describe("the settings table's flags", () => {
  it("gives every trainer and data key a flag", () => {
    const keys = new Set(FLAGGED.map((s) => s.key));
    const expected = [...Object.keys(trainerSchema.shape).map((k) => `trainer.${k}`), ...Object.keys(dataSchema.shape).map((k) => `data.${k}`)];
    expect(expected.filter((k) => !keys.has(k as never))).toEqual([]);
  });

  it("uses no spelling twice, switches included", () => {
    for (const s of FLAGGED) expect(() => settingParser(s.key)).not.toThrow();
    const spellings = FLAGGED.flatMap((s) => [...spellingsOf(s), ...Object.keys(s.switches ?? {})]);
    expect(spellings.filter((x, i) => spellings.indexOf(x) !== i)).toEqual([]);
  });

  it("answers other trainers' names with keys kiln has, none of them a kiln key itself", () => {
    const kilnKeys = new Set(ALL_SETTINGS.map((s) => s.name));
    for (const s of ALL_SETTINGS) {
      for (const name of s.otherNames ?? []) {
        expect(kilnKeys.has(name), name).toBe(false);
        expect(kilnKeyFor(name), name).toBe(s.key);
        expect(kilnKeyFor(`--${name.replace(/_/g, "-")}`), name).toBe(s.key);
      }
    }
    expect(kilnKeyFor("lr")).toBe("trainer.learning_rate");
    expect(kilnKeyFor("eval_steps")).toBe("trainer.eval_interval");
  });
});

describe("spellings from other trainers on the command line", () => {
  it("takes Hugging Face's names and underscores as the hyphenated flags", () => {
    const hf = settingsFor(["--batch_size", "4", "--num_epochs", "1", "--learning_rate", "1e-3", "--max_length", "16", "--output_dir", "x"]);
    const kiln = settingsFor(["--batch-size", "4", "--num-epochs", "1", "--learning-rate", "1e-3", "--seq-len", "16", "--output-dir", "x"]);
    const { overridden: a, ...hfValues } = hf;
    const { overridden: b, ...kilnValues } = kiln;
    expect(hfValues).toEqual(kilnValues);
    expect(hf).toMatchObject({ batchSize: 4, numEpochs: 1, lr: 1e-3, seqLen: 16, outputDir: "x" });
    expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
    expect(settingsFor(["--per-device-train-batch-size", "2", "--eval_steps", "7"])).toMatchObject({ batchSize: 2, evalInterval: 7 });
  });

  it("refuses two spellings of one setting that disagree, and takes them when they agree", () => {
    expect(() => settingsFor(["--dtype", "bf16", "--fp16"])).toThrow("--dtype bf16 and --fp16 set trainer.dtype to different values");
    expect(() => settingsFor(["--seq-len", "8", "--max_length", "16"])).toThrow("--seq-len 8 and --max_length 16 set trainer.seq_len to different values");
    expect(settingsFor(["--dtype", "bfloat16", "--bf16"]).dtype).toBe("bf16");
    expect(settingsFor(["--tf32"]).tf32).toBe(true);
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
    expect(() => settingParser("trainer.recompute")("some")).toThrow('expected one of auto, none, cheap, blocks (as trainer.recompute takes), got "some"');
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
    expect(resolveSettings(parseConfigText(text, "t.yaml")).maxCheckpoints).toBe(1);
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
