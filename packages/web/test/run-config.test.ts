import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ConfigError } from "@kiln/contract";
import { parseConfigText, resolveSettings } from "@kiln/core";
import { parseRunConfig } from "../src/run-config.js";

// The page reads kiln YAML configs with core's settings table, as kiln train does.
const models = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../models");
const files = fs.readdirSync(models).filter((f) => f.endsWith(".yaml"));
const TINY = "model:\n  arch: gpt2\n  vocab_size: 256\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 4\n  max_seq_len: 64\ntrainer:\n  max_steps: 10\n";

describe("the page's reading of a config", () => {
  it.each(files.filter((f) => !/dtype: *(bf16|f16|auto)/.test(fs.readFileSync(path.join(models, f), "utf8"))))("resolves models/%s as kiln train does", (file) => {
    const text = fs.readFileSync(path.join(models, file), "utf8");
    const { config } = parseRunConfig(text);
    const cli = resolveSettings(parseConfigText(text, "the config"));
    expect(config).toEqual(cli);
  });

  it("takes the steps box over trainer.max_steps", () => {
    expect(parseRunConfig(TINY, 3).config.maxSteps).toBe(3);
  });

  it("names the keys of the file it leaves aside", () => {
    const { ignored } = parseRunConfig(`${TINY}  save_interval: 5\n  dtype: f32\n  target_device: cpu\ndata:\n  val_fraction: 0.1\n`);
    expect(ignored).toEqual(["trainer.target_device", "trainer.save_interval"]);
  });

  it.each([
    ["trainer:\n  batch_size: 8\n", /no model section/, "the config (model)"],
    [TINY.replace("max_seq_len: 64\n", "max_seq_len: 64\n  widht: 3\n"), /unknown key model\.widht/, "the config:8"],
    [`${TINY}  seq_len: 128\n`, /seq_len 128 is longer than model\.max_seq_len 64/, "the config (trainer.seq_len)"],
    [`${TINY}  dtype: bf16\n`, /the page trains in f32/, "the config (trainer.dtype)"],
    [`${TINY}data:\n  tokenizer: ./my-folder\n`, /data\.tokenizer \(line 11\) is "\.\/my-folder"/, "the config:11"],
    ["model: [1, 2\n", /YAML syntax error/, "the config:2"],
  ])("refuses %j, naming the key", (text, message, where) => {
    let caught: unknown;
    try {
      parseRunConfig(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).message).toMatch(message);
    expect((caught as ConfigError).where).toBe(where);
    expect((caught as ConfigError).hint?.length).toBeGreaterThan(0);
  });
});
