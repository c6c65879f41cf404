import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runHfReference, torchMissing } from "../../../core/test/support/hf-reference.js";
import { expectRefused } from "./support/expectations.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln eval: the mean next-token cross-entropy over windows at 0, T, 2T, … of a token file,
// for a Hugging Face folder (against PyTorch running transformers' GPT-2, hf_reference.py)
// and for a checkpoint kiln train wrote.

const missing = torchMissing();
const IDS = textTokens(700);
let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("eval");
  await ws.writeTokens("data.bin", IDS);
});
afterAll(() => ws.remove());

const evalJson = async (args: string[]) => JSON.parse(expectSuccess(await ws.run(["eval", ...args, "--json"]), "kiln eval").stdout) as Record<string, number>;

describe("kiln eval", () => {
  it("a Hugging Face GPT-2 folder: the loss PyTorch computes over the same windows, to 1e-5; kiln sample runs the folder", async (ctx) => {
    if (missing) ctx.skip(missing);
    runHfReference("write-gpt2", ws.path("gpt2"), JSON.stringify({ n_embd: 32, n_layer: 2, n_head: 4, n_positions: 32, n_ctx: 32, vocab_size: 256 }), "3");
    for (const T of [32, 24]) {
      // 700 tokens: windows at 0, T, … while s + T + 1 <= 700 (21 of 32, 29 of 24).
      const ref = JSON.parse(runHfReference("loss", ws.path("gpt2"), JSON.stringify([...IDS]), String(T))) as { loss: number; windows: number; tokens: number };
      const got = await evalJson(["--checkpoint", "gpt2", "-d", "data.bin", "--seq-len", String(T)]);
      expect(got.windows).toBe(ref.windows);
      expect(got.windows).toBe(Math.floor((700 - 1) / T));
      expect(got.tokens).toBe(ref.tokens);
      expect(Math.abs(got.loss - ref.loss) / ref.loss).toBeLessThan(1e-5);
      expect(got.perplexity).toBeCloseTo(Math.exp(got.loss), 10);
    }
    const first = await evalJson(["--checkpoint", "gpt2", "-d", "data.bin", "--max-windows", "2"]);
    expect(first).toMatchObject({ windows: 2, tokens: 64 });
    // kiln sample runs the same folder.
    const sample = expectSuccess(await ws.run(["sample", "--checkpoint", "gpt2", "--tokenizer", "bytes", "--prompt", "Once", "--max-tokens", "8", "--temperature", "0"]), "kiln sample");
    expect(sample.stdout.startsWith("Once")).toBe(true);
  });

  it("a kiln checkpoint: windows of its max_seq_len, bits per byte for byte data, and a clear refusal of a window too long", async () => {
    await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 5 }, data: { tokenizer: "bytes" } });
    expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "kiln train");
    const r = expectSuccess(await ws.run(["eval", "--checkpoint", "out/final.safetensors", "-d", "data.bin"]), "kiln eval");
    expect(r.stdout).toMatch(/^\s+loss\s+\d+\.\d{4}$/m);
    expect(r.stdout).toMatch(/^\s+perplexity\s+\d+\.\d{2}$/m);
    const j = await evalJson(["--checkpoint", "out/final.safetensors", "-d", "data.bin"]);
    // One byte a token: bits per byte is the loss in bits.
    expect(j.bits_per_byte).toBeCloseTo(j.loss / Math.LN2, 10);
    expectRefused(await ws.run(["eval", "--checkpoint", "out/final.safetensors", "-d", "data.bin", "--seq-len", "100000"]), {
      kind: "ConfigError",
      where: "--seq-len",
      message: /--seq-len 100000 is longer than the model's max_seq_len/,
      hint: /pass --seq-len \d+ or less/,
    });
    await ws.writeTokens("short.bin", IDS.slice(0, 10));
    expectRefused(await ws.run(["eval", "--checkpoint", "out/final.safetensors", "-d", "short.bin"]), {
      kind: "DataError",
      where: "short.bin",
      message: /10 tokens hold no window of \d+ inputs and their \d+ next tokens/,
      hint: /a longer file/,
    });
  });
});
