import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectRefused } from "./support/expectations.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln sample continues a prompt from a training checkpoint, with the tokenizer the
// checkpoint names (from the data's sidecar), or --tokenizer.
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("sample");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 3, save_interval: 3 } });
});
afterEach(() => ws.remove());

const STORY = "Once upon a time there was a little fox. The fox liked to run by the river and look at the fish.\n".repeat(40);

describe("kiln sample", () => {
  it("prints the prompt followed by generated text, using the tokenizer recorded at training", async () => {
    await ws.write("story.txt", STORY);
    expectSuccess(await ws.run(["prepare", "-i", "story.txt", "-o", "story.bin", "--tokenizer", "bytes"]), "kiln prepare");
    expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "story.bin", "--output-dir", "out", "--headless"]), "kiln train");

    const r = await ws.run(["sample", "--checkpoint", "out/step_3.safetensors", "--prompt", "Once upon", "--max-tokens", "24", "--temperature", "0"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.startsWith("Once upon")).toBe(true);
    expect(r.stdout.endsWith("\n")).toBe(true);
    const generated = r.stdout.slice("Once upon".length, -1);
    expect(generated.length).toBeGreaterThan(0);
    // Greedy decoding is deterministic.
    const again = await ws.run(["sample", "--checkpoint", "out/step_3.safetensors", "--prompt", "Once upon", "--max-tokens", "24", "--temperature", "0"]);
    expect(again.stdout).toBe(r.stdout);
  });

  it("says so when the checkpoint names no tokenizer and none is given, and accepts --tokenizer", async () => {
    // Raw tokens without a sidecar, and a config without data.tokenizer: nothing records the tokenizer.
    await ws.writeTokens("data.bin", textTokens(2000));
    expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");

    expectRefused(await ws.run(["sample", "--checkpoint", "out/step_3.safetensors", "--prompt", "Once"]), {
      kind: "CheckpointError",
      where: "out/step_3.safetensors",
      message: /^the checkpoint does not say which tokenizer its data used/,
      hint: /pass --tokenizer gpt2\|cl100k\|o200k\|bytes/,
    });

    const r = await ws.run(["sample", "--checkpoint", "out/step_3.safetensors", "--prompt", "Once", "--tokenizer", "bytes", "--max-tokens", "8"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.startsWith("Once")).toBe(true);
  });
});
