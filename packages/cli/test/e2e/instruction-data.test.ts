import { cp, readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCheckpoint } from "./support/checkpoints.js";
import { expectRefused, treeChanges } from "./support/expectations.js";
import { jsonLines } from "./support/kiln-process.js";
import { MODELS_DIR, REPO_ROOT } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// kiln prepare turns chat, instruct and text rows into tokens with a loss mask;
// kiln train draws one example a row and takes the loss where the mask says.

/** A byte-level BPE tokenizer (392 ids) with ChatML turn markers and a ChatML chat template, and rows for it (tooling/fixtures/chat_fixture.py). */
const CHAT = path.join(REPO_ROOT, "packages", "core", "test", "fixtures", "chat");

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("instruction-data");
  await cp(path.join(CHAT, "tokenizer"), ws.path("tok"), { recursive: true });
  for (const f of ["chat.jsonl", "chat.parquet"]) await cp(path.join(CHAT, f), ws.path(f));
  // Many copies of the fixture's four conversations, to train on.
  const rows = (await readFile(path.join(CHAT, "chat.jsonl"), "utf8")).trim().split("\n");
  await ws.write("many.jsonl", `${Array.from({ length: 40 }, () => rows).flat().join("\n")}\n`);
});
afterAll(() => ws.remove());

describe("chat rows through kiln prepare and kiln train", () => {
  it("prepares the same tokens and mask from JSON Lines and from Parquet, and says what it wrote", async () => {
    const a = expectSuccess(await ws.run(["prepare", "-i", "chat.jsonl", "-o", "a.bin", "--tokenizer", "tok", "--val", "0"]), "kiln prepare (jsonl)");
    expect(a.stdout).toMatch(/^wrote a\.bin: 106 tokens in 4 examples \(chat\) from 4 rows of 1 file, 26 trained \(tokenizer tok@sha256:[0-9a-f]{16}, vocab 392, validation 0\); sidecar a\.bin\.json, loss mask a\.bin\.mask\n$/);
    expectSuccess(await ws.run(["prepare", "-i", "chat.parquet", "-o", "b.bin", "--tokenizer", "tok", "--val", "0"]), "kiln prepare (parquet)");
    expect(await readFile(ws.path("b.bin"))).toEqual(await readFile(ws.path("a.bin")));
    expect(await readFile(ws.path("b.bin.mask"))).toEqual(await readFile(ws.path("a.bin.mask")));
    const sidecar = JSON.parse(await readFile(ws.path("a.bin.json"), "utf8"));
    expect(sidecar).toMatchObject({ examples: 4, trained_tokens: 26, tokens: 106, sources: ["chat.jsonl"] });
  });

  it("trains one example a row, padded, on the assistant's tokens only; the loss falls and kiln sample --chat answers as trained", async () => {
    expectSuccess(await ws.run(["prepare", "-i", "many.jsonl", "-o", "many.bin", "--tokenizer", "tok", "--seq-len", "48"]), "kiln prepare");
    await ws.write(
      "chat.yaml",
      "model: { arch: llama, vocab_size: 400, hidden_size: 32, num_layers: 1, num_heads: 2, max_seq_len: 48 }\n" +
        "trainer: { batch_size: 4, seq_len: 48, max_steps: 100, learning_rate: 0.01, log_interval: 1, eval_interval: 1000, save_interval: 1000, seed: 3 }\n",
    );
    const r = expectSuccess(await ws.run(["train", "-f", "chat.yaml", "-d", "many.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expect(`${r.stdout}${r.stderr}`).toMatch(/160 examples \(158 for training, one a row, padded to seq_len 48 \(attention never crosses examples; --pack fills rows\)\); loss on 1,040 masked-in tokens/);
    const losses = jsonLines(r.stdout).flatMap((l) => (typeof l.loss === "number" ? [l.loss] : []));
    expect(losses.length).toBe(100);
    // Replies are short and repeat: the loss on them falls far below a uniform guess (ln 400 = 6.0).
    expect(losses[0]).toBeGreaterThan(5);
    expect(losses.at(-1)!).toBeLessThan(2);

    // kiln eval scores an example file one example a window, over the trained targets only.
    const e = expectSuccess(await ws.run(["eval", "--checkpoint", "out/final.safetensors", "-d", "a.bin", "--json"]), "kiln eval");
    const scored = JSON.parse(e.stdout) as { loss: number; tokens: number; windows: number; examples: number };
    expect([scored.tokens, scored.windows, scored.examples]).toEqual([26, 4, 4]);
    expect(scored.loss).toBeLessThan(2);

    // kiln sample --chat renders the user's message with the checkpoint's template and prints the reply up to the end of the turn.
    const answer = async (args: string[]) => expectSuccess(await ws.run(["sample", "--chat", "--checkpoint", "out/final.safetensors", "--temperature", "0", "--max-tokens", "40", ...args]), "kiln sample --chat").stdout;
    expect(await answer(["--prompt", "What is the capital of France?"])).toBe("The capital of France is Paris.\n");
    expect(await answer(["--prompt", "Count to three."])).toBe("One, two, three.\n");
    await ws.write("sky.json", JSON.stringify([{ role: "system", content: "You answer in one word." }, { role: "user", content: "Which colour is the sky?" }]));
    expect(await answer(["--messages", "sky.json"])).toBe("Blue.\n");
    expectRefused(await ws.run(["sample", "--chat", "--checkpoint", "out/final.safetensors", "--tokenizer", "gpt2", "--prompt", "hi"]), {
      kind: "CheckpointError",
      where: "out/final.safetensors",
      message: /the tokenizer gpt2 encodes the prompt into id \d+, outside the model's vocab_size 400/,
      hint: /Leave --tokenizer out/,
    });
  });

  it("packs examples into rows with --pack (attention and positions inside each example): the loss falls and kiln sample --chat answers as trained", async () => {
    // many.bin and chat.yaml: the test before's.
    const r = expectSuccess(await ws.run(["train", "-f", "chat.yaml", "-d", "many.bin", "--pack", "--max-steps", "60", "--output-dir", "packed", "--headless"]), "kiln train --pack");
    const [, rows] = /160 examples \(158 for training packed into (\d+) rows of seq_len 48 \(--pack: attention and positions kept inside each example/.exec(`${r.stdout}${r.stderr}`) ?? [];
    // Four conversations of about 19, 43, 21 and 22 positions, repeated: three rows for every four.
    expect(Number(rows)).toBeLessThan(0.8 * 158);
    const losses = jsonLines(r.stdout).flatMap((l) => (typeof l.loss === "number" ? [l.loss] : []));
    expect(losses[0]).toBeGreaterThan(5);
    expect(losses.at(-1)!).toBeLessThan(2);
    // Generation runs one conversation from position 0: what a packed row taught each example.
    const answer = async (prompt: string) =>
      expectSuccess(await ws.run(["sample", "--chat", "--checkpoint", "packed/final.safetensors", "--temperature", "0", "--max-tokens", "40", "--prompt", prompt]), "kiln sample --chat").stdout;
    expect(await answer("What is the capital of France?")).toBe("The capital of France is Paris.\n");
    expect(await answer("Count to three.")).toBe("One, two, three.\n");
    // A token file has no examples to pack: said, and trained as before.
    await ws.write("plain.bin", new Uint8Array(new Uint32Array(Array.from({ length: 4000 }, (_, i) => (i * 7) % 300)).buffer));
    const plain = expectSuccess(await ws.run(["train", "-f", "chat.yaml", "-d", "plain.bin", "--pack", "--max-steps", "1", "--output-dir", "plain", "--headless"]), "kiln train --pack, token file");
    expect(plain.stderr).toMatch(/warning: trainer\.pack \(--pack\) has no effect on a token file/);
  });

  it("keeps the chat template in checkpoints and exports: --chat-template's for a built-in tokenizer, the folder's as chat_template.jinja", async () => {
    const chatml = await readFile(path.join(MODELS_DIR, "chatml.jinja"), "utf8");
    await cp(path.join(MODELS_DIR, "chatml.jinja"), ws.path("chatml.jinja"));
    expectSuccess(await ws.run(["prepare", "-i", "many.jsonl", "-o", "bytes.bin", "--tokenizer", "bytes", "--chat-template", "chatml.jinja", "--seq-len", "160"]), "kiln prepare");
    expect(JSON.parse(await readFile(ws.path("bytes.bin.json"), "utf8")).chat_template).toBe(chatml);
    await ws.write("bytes.yaml", "model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 160 }\ntrainer: { batch_size: 2, seq_len: 160, max_steps: 2, save_interval: 1000 }\n");
    expectSuccess(await ws.run(["train", "-f", "bytes.yaml", "-d", "bytes.bin", "--output-dir", "bytes-out", "--headless"]), "kiln train");
    expect((await readCheckpoint(ws.path("bytes-out", "final.safetensors"))).metadata["kiln.chat_template"]).toBe(chatml);
    // No --chat-template: the checkpoint's own.
    expectSuccess(await ws.run(["sample", "--chat", "--checkpoint", "bytes-out/final.safetensors", "--prompt", "hi", "--max-tokens", "4"]), "kiln sample --chat");

    expectSuccess(await ws.run(["export", "--checkpoint", "out/final.safetensors", "--out", "hf"]), "kiln export");
    const config = JSON.parse(await readFile(ws.path("hf", "tokenizer_config.json"), "utf8")) as { chat_template: string };
    expect(await readFile(ws.path("hf", "chat_template.jinja"), "utf8")).toBe(config.chat_template);

    // A run on text has no template to answer with.
    await ws.write("story.txt", "once upon a time there was a cat. ".repeat(40));
    expectSuccess(await ws.run(["prepare", "-i", "story.txt", "-o", "story.bin", "--tokenizer", "bytes"]), "kiln prepare");
    expectSuccess(await ws.run(["train", "-f", "bytes.yaml", "-d", "story.bin", "--output-dir", "story-out", "--headless", "--max-steps", "1"]), "kiln train");
    expectRefused(await ws.run(["sample", "--chat", "--checkpoint", "story-out/final.safetensors", "--prompt", "hi"]), {
      kind: "DataError",
      where: "story-out/final.safetensors",
      message: /--chat needs a chat template, and the tokenizer bytes has none/,
      hint: /--chat-template FILE/,
    });
  });

  it("refuses an unknown role naming the file and line, and writes nothing", async () => {
    await ws.write("bad.jsonl", `${JSON.stringify({ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] })}\n${JSON.stringify({ messages: [{ role: "robot", content: "q" }] })}\n`);
    const before = await ws.snapshot();
    expectRefused(await ws.run(["prepare", "-i", "bad.jsonl", "-o", "bad.bin", "--tokenizer", "tok"]), {
      kind: "DataError",
      where: "bad.jsonl:2",
      message: /messages\[0\]\.role is "robot"; a role is one of system, user, assistant/,
      hint: /Rename the role/,
    });
    expect(treeChanges(before, await ws.snapshot())).toEqual([]);
  });

  it("refuses chat rows for a tokenizer without a chat template, and example flags for text files", async () => {
    expectRefused(await ws.run(["prepare", "-i", "chat.jsonl", "-o", "c.bin", "--tokenizer", "gpt2"]), {
      kind: "DataError",
      where: "chat.jsonl",
      message: /chat rows need a chat template, and the tokenizer gpt2 has none/,
      hint: /--chat-template FILE/,
    });
    await ws.write("story.txt", "once upon a time\n");
    expectRefused(await ws.run(["prepare", "-i", "story.txt", "-o", "s.bin", "--seq-len", "64"]), {
      kind: "DataError",
      where: "--seq-len",
      message: /--seq-len applies to example rows/,
      hint: /--format chat\|instruct\|text/,
    });
  });
});
