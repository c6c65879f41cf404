import { existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectRefused, treeChanges } from "./support/expectations.js";
import { Workspace, configText, textTokens } from "./support/workspace.js";

// Each bad config or flag is refused before anything is written: no output folder appears.
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("config");
  await ws.writeTokens("data.bin", textTokens(2000));
});
afterEach(() => ws.remove());

async function refuse(args: string[], env?: Record<string, string>) {
  const before = await ws.snapshot();
  const r = await ws.run(["train", ...args, "-d", "data.bin", "--output-dir", "out", "--headless"], env ? { env } : {});
  expect(existsSync(ws.path("out"))).toBe(false);
  expect(treeChanges(before, await ws.snapshot())).toEqual([]);
  return r;
}

/** 1-based line of the first line of `text` that starts with `prefix` (after indentation). */
function lineOf(text: string, prefix: string): number {
  const i = text.split("\n").findIndex((l) => l.trimStart().startsWith(prefix));
  if (i < 0) throw new Error(`no line starts with ${prefix}`);
  return i + 1;
}

describe("kiln train refuses a bad config or flag", () => {
  it("an unknown key, with its line and a did-you-mean", async () => {
    const text = configText({ trainer: { learning_rat: 0.01 } });
    await ws.write("typo.yaml", text);
    const line = lineOf(text, "learning_rat:");
    expectRefused(await refuse(["-f", "typo.yaml"]), {
      kind: "ConfigError",
      where: `typo.yaml:${line}`,
      message: new RegExp(`^unknown key trainer\\.learning_rat \\(line ${line}\\); did you mean trainer\\.learning_rate\\?`),
      hint: /^rename trainer\.learning_rat to trainer\.learning_rate/,
    });
  });

  it("a value of the wrong type", async () => {
    const text = configText({ model: { hidden_size: "sixteen" } });
    await ws.write("type.yaml", text);
    const line = lineOf(text, "hidden_size:");
    expectRefused(await refuse(["-f", "type.yaml"]), {
      kind: "ConfigError",
      where: `type.yaml:${line}`,
      message: new RegExp(`^model\\.hidden_size \\(line ${line}\\) must be a number, got "sixteen"`),
      hint: /fix the value \(every key, its type and range: kiln.s docs\/settings\.md, or kiln train --help\)/,
    });
  });

  it("hidden_size not divisible by num_heads", async () => {
    await ws.writeConfig("heads.yaml", { model: { hidden_size: 18, num_heads: 4 } });
    expectRefused(await refuse(["-f", "heads.yaml"]), {
      kind: "ConfigError",
      where: "heads.yaml (model.hidden_size)",
      message: /^hidden size 18 is not divisible by the 4 heads/,
      hint: /multiple of 4 \(e\.g\. 20\) or change num_heads/,
    });
  });

  it("--seq-len longer than model.max_seq_len", async () => {
    await ws.writeConfig("tiny.yaml");
    expectRefused(await refuse(["-f", "tiny.yaml", "--seq-len", "32"]), {
      kind: "ConfigError",
      where: "tiny.yaml (--seq-len)",
      message: /^seq_len 32 is longer than model\.max_seq_len 16/,
      hint: /use --seq-len 16 or less, or raise model\.max_seq_len/,
    });
  });

  it("a config file that does not exist", async () => {
    expectRefused(await refuse(["-f", "models/missing.yaml"]), {
      kind: "ConfigError",
      where: "models/missing.yaml",
      message: /^the config file does not exist/,
      hint: /check the path given to -f/,
    });
  });

  it("--dtype bf16 with --fp16, which ask for different dtypes", async () => {
    await ws.writeConfig("tiny.yaml");
    expectRefused(await refuse(["-f", "tiny.yaml", "--dtype", "bf16", "--fp16"]), {
      kind: "ConfigError",
      where: "--fp16",
      message: /^--dtype bf16 and --fp16 set trainer\.dtype to different values/,
      hint: /pass one of them \(trainer\.dtype takes one of f32, bf16, f16, auto/,
    });
  });

  it("--gpus with a cpu target", async () => {
    await ws.writeConfig("tiny.yaml");
    expectRefused(await refuse(["-f", "tiny.yaml", "--gpus", "0,1", "--target-device", "cpu"]), {
      kind: "ConfigError",
      where: "--gpus",
      message: /^--gpus trains on GPUs, but the target device is cpu/,
      hint: /or use --ranks N for data parallel on the CPU/,
    });
  });

  it("--sync-backend nccl for ranks on the CPU, refused before any rank starts", async () => {
    await ws.writeConfig("tiny.yaml");
    const r = await refuse(["-f", "tiny.yaml", "--ranks", "2", "--sync-backend", "nccl", "--target-device", "cpu"]);
    expectRefused(r, {
      kind: "ConfigError",
      where: "--sync-backend",
      message: /^--sync-backend nccl syncs GPU buffers, but this run trains on the CPU/,
      hint: /use --sync-backend cpu \(or gloo\) for CPU ranks/,
    });
    expect(r.stderr).not.toMatch(/rank 1:/);
  });

  it("--sync-backend nccl with one rank on the CPU is refused too; another backend with one rank is named as having no effect", async () => {
    await ws.writeConfig("tiny.yaml");
    expectRefused(await refuse(["-f", "tiny.yaml", "--sync-backend", "nccl", "--target-device", "cpu"]), {
      kind: "ConfigError",
      where: "--sync-backend",
      message: /^--sync-backend nccl syncs GPU buffers, but this run trains on the CPU/,
      hint: /use --sync-backend cpu \(or gloo\) for CPU ranks/,
    });
    const gloo = await ws.run(["train", "-f", "tiny.yaml", "--sync-backend", "gloo", "--target-device", "cpu", "--max-steps", "1", "-d", "data.bin", "--output-dir", "one-rank", "--headless"]);
    expect(gloo.code, gloo.stderr).toBe(0);
    expect(gloo.stderr).toContain("warning: --sync-backend gloo has no effect: this run has one rank");
  });

  it("--ranks that disagrees with WORLD_SIZE", async () => {
    await ws.writeConfig("tiny.yaml");
    expectRefused(await refuse(["-f", "tiny.yaml", "--ranks", "3"], { WORLD_SIZE: "2", RANK: "0" }), { kind: "ConfigError", where: "--ranks", message: /^--ranks 3 disagrees with WORLD_SIZE=2/, hint: /leave them out/ });
  });
});
