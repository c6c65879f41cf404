import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadConfigFile } from "../../cli/src/config/load-config.js";
import { resolveSettings } from "../../cli/src/config/settings.js";
import { PageConfigError, parseRunConfig } from "../src/run-config.js";

// The page reads kiln YAML configs itself (it bundles no CLI): the same keys and defaults as kiln train.
const models = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../models");
const files = fs.readdirSync(models).filter((f) => f.endsWith(".yaml"));

describe("the page's reading of a config", () => {
  it.each(files)("resolves models/%s as kiln train does", (file) => {
    const page = parseRunConfig(fs.readFileSync(path.join(models, file), "utf8"));
    const cli = resolveSettings(loadConfigFile(path.join(models, file)));
    expect(page).toEqual({
      model: cli.model,
      batchSize: cli.batchSize,
      seqLen: cli.seqLen,
      gradAccum: cli.gradAccum,
      maxSteps: cli.maxSteps,
      lr: cli.lr,
      minLr: cli.minLr,
      warmupSteps: cli.warmupSteps,
      schedule: cli.schedule,
      weightDecay: cli.weightDecay,
      beta1: cli.beta1,
      beta2: cli.beta2,
      eps: cli.eps,
      gradClip: cli.gradClip,
      logInterval: cli.logInterval,
      evalInterval: cli.evalInterval,
      evalIters: cli.evalIters,
      seed: cli.seed,
      recompute: cli.recompute,
      loadBalanceAlpha: cli.loadBalanceAlpha,
      tokenizer: cli.tokenizer ?? "bytes",
      valFraction: cli.valFraction,
    });
  });

  it.each([
    ["trainer:\n  batch_size: 8\n", /no model section/, "model"],
    ["model:\n  arch: gpt2\n  vocab_size: 256\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 4\n  max_seq_len: 64\n  widht: 3\n", /model\.widht is not a model key/, "model.widht"],
    ["model:\n  arch: gpt2\n  vocab_size: 256\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 4\n  max_seq_len: 64\ntrainer:\n  seq_len: 128\n", /seq_len 128 is longer than model\.max_seq_len 64/, "trainer.seq_len"],
    ["model:\n  arch: gpt2\n  vocab_size: 256\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 4\n  max_seq_len: 64\ntrainer:\n  dtype: bf16\n", /the page trains in f32/, "trainer.dtype"],
    ["model:\n  arch: gpt2\n  vocab_size: 256\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 4\n  max_seq_len: 64\ndata:\n  tokenizer: ./my-folder\n", /data\.tokenizer is "\.\/my-folder"/, "data.tokenizer"],
    ["model: [1, 2\n", /not valid YAML/, "config"],
  ])("refuses %j, naming the key", (text, message, where) => {
    let caught: unknown;
    try {
      parseRunConfig(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PageConfigError);
    expect((caught as PageConfigError).message).toMatch(message);
    expect((caught as PageConfigError).where).toBe(where);
    expect((caught as PageConfigError).hint.length).toBeGreaterThan(0);
  });
});
