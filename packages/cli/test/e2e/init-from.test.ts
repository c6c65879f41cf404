import { cp, readFile, readdir, rm, stat, truncate, writeFile } from "node:fs/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { differingTensors, metricsLog, readCheckpoint } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { type ConfigSections, Workspace, textTokens } from "./support/workspace.js";

// Starting from trained weights: a kiln checkpoint, or the Hugging Face folder
// `kiln export` writes from it, gives the same weights and the same first loss.

const LLAMA = { arch: "llama", vocab_size: 256, hidden_size: 16, num_layers: 2, num_heads: 4, kv_heads: 2, max_seq_len: 16, intermediate_size: 24 };
const TRAINER_ONLY = "trainer: { batch_size: 2, seq_len: 16, max_steps: 2, learning_rate: 0.003, log_interval: 1, eval_interval: 1000, eval_iters: 1, seed: 7 }\n";

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("init-from");
  await ws.writeTokens("data.bin", textTokens(3000));
  await ws.write("finetune.yaml", TRAINER_ONLY);
});
afterEach(() => ws.remove());

async function train(config: string, out: string, ...args: string[]) {
  return expectSuccess(await ws.run(["train", "-f", config, "-d", "data.bin", "--output-dir", out, "--headless", ...args]), `kiln train ${args.join(" ")}`);
}

async function firstLoss(out: string): Promise<number> {
  return (await metricsLog(ws.path(out))).find((l) => l.step === 1 && "loss" in l)!.loss as number;
}

async function roundTrip(model: ConfigSections["model"]) {
  await ws.writeConfig("base.yaml", { model, trainer: { max_steps: 3 } });
  await train("base.yaml", "base");
  expectSuccess(await ws.run(["export", "--checkpoint", "base/final.safetensors", "--out", "hf"]), "kiln export");

  const final = await readCheckpoint(ws.path("base", "final.safetensors"));
  const exported = await readCheckpoint(ws.path("hf", "model.safetensors"));
  expect(exported.metadata).toEqual({ format: "pt" });
  expect(differingTensors(final, exported)).toEqual([]);

  const fromKiln = await train("finetune.yaml", "from-kiln", "--init-from", "base/final.safetensors");
  expect(fromKiln.stderr).toContain("weights from base/final.safetensors (optimizer state fresh)");
  await train("finetune.yaml", "from-hf", "--init-from", "hf");
  await train("base.yaml", "fresh", "--max-steps", "1");
  expect(await firstLoss("from-hf")).toBe(await firstLoss("from-kiln"));
  // The comparison can fail: trained weights start lower than a fresh model.
  expect(await firstLoss("from-hf")).toBeLessThan(await firstLoss("fresh"));
  const [a, b] = [await readCheckpoint(ws.path("from-kiln", "final.safetensors")), await readCheckpoint(ws.path("from-hf", "final.safetensors"))];
  expect(differingTensors(a, b)).toEqual([]);
}

/** The run exits non-zero with `where: message` in its error, and leaves the folder as it was. */
async function expectRefused(args: string[], where: string, message: string) {
  const before = await readdir(ws.dir);
  const r = await ws.run(["train", "-f", "finetune.yaml", "-d", "data.bin", "--output-dir", "refused", "--headless", ...args]);
  expect(r.code, r.stderr).not.toBe(0);
  expect(r.stderr).toMatch(new RegExp(`CheckpointError in ${where}: ${message}`));
  expect(await readdir(ws.dir)).toEqual(before);
}

describe("kiln train --init-from", () => {
  it("GPT-2: train -> export -> --init-from gives bit-identical weights and the same first loss", async () => {
    await roundTrip({});
  });

  it("Llama (GQA, untied): train -> export -> --init-from gives bit-identical weights and the same first loss", async () => {
    await roundTrip(LLAMA);
  });

  it("loads shards; refuses, writing nothing, a model section that disagrees, a missing or truncated shard, a wrong shape, a RoPE scaling kiln does not compute, an unknown model_type", async () => {
    await ws.writeConfig("base.yaml", { model: LLAMA, trainer: { max_steps: 1 } });
    await train("base.yaml", "base");
    expectSuccess(await ws.run(["export", "--checkpoint", "base/final.safetensors", "--out", "hf"]), "kiln export");

    await ws.writeConfig("wide.yaml", { model: { ...LLAMA, hidden_size: 32 } });
    const wide = await ws.run(["train", "-f", "wide.yaml", "-d", "data.bin", "--init-from", "hf", "--output-dir", "refused"]);
    expect(wide.code).not.toBe(0);
    expect(wide.stderr).toContain("model.hidden_size is 32 in wide.yaml, but 16 in hf/config.json");

    // Shard the export in two by hand, as transformers does for large models: it loads as the single file does.
    const { openSafetensors, writeSafetensors } = await import("@kiln/core");
    const whole = await openSafetensors(ws.path("hf", "model.safetensors"));
    const tensors = await Promise.all(whole.names.map((n) => whole.read(n)));
    await whole.close();
    const shardOf = (i: number) => `model-0000${(i % 2) + 1}-of-00002.safetensors`;
    await cp(ws.path("hf"), ws.path("sharded"), { recursive: true });
    await rm(ws.path("sharded", "model.safetensors"));
    for (const k of [0, 1]) await writeSafetensors(ws.path("sharded", shardOf(k)), tensors.filter((_, i) => i % 2 === k));
    await writeFile(ws.path("sharded", "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: Object.fromEntries(tensors.map((t, i) => [t.name, shardOf(i)])) }));
    await train("finetune.yaml", "from-shards", "--init-from", "sharded", "--max-steps", "1");
    await train("finetune.yaml", "from-hf", "--init-from", "hf", "--max-steps", "1");
    expect(await firstLoss("from-shards")).toBe(await firstLoss("from-hf"));

    // No -f: the folder brings the model, the flags and the trainer's defaults the rest.
    const bare = ["train", "-d", "data.bin", "--init-from", "hf", "--batch-size", "2", "--seq-len", "16", "--learning-rate", "0.003", "--log-interval", "1", "--eval-interval", "1000", "--eval-iters", "1", "--seed", "7", "--headless"];
    expectSuccess(await ws.run([...bare, "--max-steps", "1", "--output-dir", "no-config"]), "kiln train --init-from without -f");
    expect(await firstLoss("no-config")).toBe(await firstLoss("from-hf"));
    const endless = await ws.run([...bare, "--output-dir", "endless"]);
    expect(endless.code).not.toBe(0);
    expect(endless.stderr).toContain("hf (trainer.max_steps): neither trainer.max_steps nor trainer.num_epochs is set");
    const nothing = await ws.run(["train", "-d", "data.bin"]);
    expect(nothing.code).not.toBe(0);
    expect(nothing.stderr).toContain("ConfigError in -f: kiln train needs a config file");

    await cp(ws.path("hf"), ws.path("narrow"), { recursive: true });
    const config = JSON.parse(await readFile(ws.path("hf", "config.json"), "utf8")) as Record<string, unknown>;
    await writeFile(ws.path("narrow", "config.json"), JSON.stringify({ ...config, intermediate_size: 32 }));
    await expectRefused(["--init-from", "narrow"], "narrow/model\\.safetensors", "tensor model\\.layers\\.0\\.mlp\\.gate_proj\\.weight has shape \\[24, 16\\], but config\\.json says the model needs \\[32, 16\\]");

    await cp(ws.path("sharded"), ws.path("missing"), { recursive: true });
    await rm(ws.path("missing", "model-00002-of-00002.safetensors"));
    await expectRefused(["--init-from", "missing"], "missing/model\\.safetensors\\.index\\.json", "shard model-00002-of-00002\\.safetensors is missing \\(the index puts tensor \\S+ in it\\)");

    await cp(ws.path("hf"), ws.path("truncated"), { recursive: true });
    await truncate(ws.path("truncated", "model.safetensors"), (await stat(ws.path("truncated", "model.safetensors"))).size - 4);
    await expectRefused(["--init-from", "truncated"], 'truncated/model\\.safetensors \\(tensor "model\\.\\S+"\\)', ".*the file is truncated");

    for (const [dir, change, where, what] of [
      ["scaled", { rope_scaling: { rope_type: "yarn", factor: 2 } }, "scaled/config\\.json \\(rope_scaling\\.rope_type\\)", 'RoPE scaling of type "yarn" is not one kiln computes'],
      ["falcon", { model_type: "falcon" }, "falcon/config\\.json \\(model_type\\)", 'model_type "falcon" is not one kiln trains'],
    ] as const) {
      await cp(ws.path("hf"), ws.path(dir), { recursive: true });
      await writeFile(ws.path(dir, "config.json"), JSON.stringify({ ...config, ...change }));
      await expectRefused(["--init-from", dir], where, what);
    }
  });
});
