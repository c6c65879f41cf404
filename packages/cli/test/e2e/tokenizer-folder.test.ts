import { cp, readFile, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readCheckpoint } from "./support/checkpoints.js";
import { expectRefused } from "./support/expectations.js";
import { REPO_ROOT } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// A Hugging Face tokenizer folder (tokenizer.json) tokenizes the data, is recorded in
// checkpoints with its files, samples, exports, and guards --init-from against data
// prepared with another tokenizer.

/** Byte-level BPE as GPT-2's: 277 ids, <|endoftext|> = 276 as BOS and EOS. */
const TOKENIZER = path.join(REPO_ROOT, "packages", "core", "test", "fixtures", "tiny-bpe-tokenizer");
const STORY = "the cat sat on the mat. the fox ran to the river and the cat went home.\n".repeat(60);

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("tokenizer-folder");
  await ws.write("story.txt", STORY);
  await cp(TOKENIZER, ws.path("tok"), { recursive: true });
  await ws.writeConfig("tiny.yaml", { model: { vocab_size: 288 }, trainer: { max_steps: 3, save_interval: 3 } });
});
afterEach(() => ws.remove());

describe("a tokenizer folder", () => {
  it("prepares, trains, samples and exports with the folder's tokenizer.json", async () => {
    const prepared = expectSuccess(await ws.run(["prepare", "-i", "story.txt", "-o", "story.bin", "--tokenizer", "tok"]), "kiln prepare");
    expect(prepared.stdout).toMatch(/\(tokenizer tok@sha256:[0-9a-f]{16}, vocab 277, /);
    const sidecar = JSON.parse(await readFile(ws.path("story.bin.json"), "utf8"));
    expect(sidecar).toMatchObject({ tokenizer: expect.stringMatching(/^tok@sha256:/), tokenizer_path: ws.path("tok") });

    expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "story.bin", "--output-dir", "out", "--headless"]), "kiln train");
    const meta = (await readCheckpoint(ws.path("out", "step_3.safetensors"))).metadata;
    expect(meta["kiln.tokenizer"]).toBe(sidecar.tokenizer);
    expect(Object.keys(JSON.parse(meta["kiln.tokenizer_files"]!)).sort()).toEqual(["tokenizer.json", "tokenizer_config.json"]);

    // The checkpoint holds the tokenizer: sampling works with the folder gone.
    await ws.run(["export", "--checkpoint", "out/final.safetensors", "--out", "hf"]);
    await rm(ws.path("tok"), { recursive: true });
    const r = expectSuccess(await ws.run(["sample", "--checkpoint", "out/step_3.safetensors", "--prompt", "the cat", "--max-tokens", "12", "--temperature", "0"]), "kiln sample");
    expect(r.stdout.startsWith("the cat")).toBe(true);
    expect(r.stdout.length).toBeGreaterThan("the cat\n".length);

    expect((await readdir(ws.path("hf"))).sort()).toEqual(["README.md", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]);
    expect(await readFile(ws.path("hf", "tokenizer.json"), "utf8")).toBe(await readFile(path.join(TOKENIZER, "tokenizer.json"), "utf8"));
    expect(JSON.parse(await readFile(ws.path("hf", "config.json"), "utf8"))).toMatchObject({ bos_token_id: 276, eos_token_id: 276 });
  });

  it("--init-from a folder with its tokenizer refuses data prepared with another tokenizer, naming both and writing nothing", async () => {
    expectSuccess(await ws.run(["prepare", "-i", "story.txt", "-o", "story.bin", "--tokenizer", "tok"]), "kiln prepare");
    expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "story.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", "out/final.safetensors", "--out", "hf"]), "kiln export");
    expectSuccess(await ws.run(["prepare", "-i", "story.txt", "-o", "bytes.bin", "--tokenizer", "bytes"]), "kiln prepare");
    await ws.write("finetune.yaml", "trainer: { max_steps: 2, batch_size: 2, seq_len: 16 }\n");

    const before = await ws.snapshot();
    expectRefused(await ws.run(["train", "-f", "finetune.yaml", "-d", "bytes.bin", "--init-from", "hf", "--output-dir", "refused", "--headless"]), {
      kind: "DataError",
      where: "bytes.bin.json",
      message: /^the data was prepared with tokenizer bytes, but the model was trained with tokenizer hf@sha256:[0-9a-f]{16}/,
      hint: /kiln prepare --tokenizer hf /,
    });
    expect((await ws.snapshot()).size).toBe(before.size);
    // The folder's own tokenizer (another copy of the same tokenizer.json) is accepted.
    expectSuccess(await ws.run(["train", "-f", "finetune.yaml", "-d", "story.bin", "--init-from", "hf", "--output-dir", "tuned", "--headless"]), "kiln train --init-from hf");
  });
});
