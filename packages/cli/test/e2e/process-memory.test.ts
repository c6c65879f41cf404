import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KilnResult } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A whole training run (steps, evaluation, a checkpoint, the final weights) stays within
// the process peak the banner and kiln estimate announce: the memory plan (the wasm
// memory is the process's own), the Node runtime and the kernel threads.
const REPORT_PEAK = path.join(path.dirname(fileURLToPath(import.meta.url)), "support", "report-peak-rss.cjs");
const CONFIG = `model: { arch: gpt2, vocab_size: 4096, hidden_size: 256, num_layers: 4, num_heads: 4, max_seq_len: 128 }
trainer: { batch_size: 8, seq_len: 128, max_steps: 2, eval_interval: 1, eval_iters: 2, save_interval: 1 }
`;

const UNITS: Record<string, number> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };
const bytesOf = (n: string, unit: string) => Number(n) * UNITS[unit];

let ws: Workspace;
let run: KilnResult;
beforeAll(async () => {
  ws = await Workspace.create("process-memory");
  await ws.write("model.yaml", CONFIG);
  await ws.writeTokens("data.bin", textTokens(40_000));
  run = expectSuccess(
    await ws.run(["train", "-f", "model.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"], { env: { NODE_OPTIONS: `--require ${REPORT_PEAK}` } }),
    "training with evaluation and checkpoints",
  );
});
afterAll(() => ws.remove());

describe("a training process's peak RSS", () => {
  it("stays within 15% above the banner's expected peak, which kiln estimate prints too", async () => {
    const banner = /^\s+peak\s+~(\d+(?:\.\d+)?) (B|KiB|MiB|GiB) RSS expected for the process: the plan (\d+(?:\.\d+)?) (B|KiB|MiB|GiB) \(host memory\)/m.exec(run.stderr);
    expect(banner, run.stderr).not.toBeNull();
    const expected = bytesOf(banner![1], banner![2]);
    const plan = bytesOf(banner![3], banner![4]);
    const measured = Number(/^peak_rss_bytes (\d+)$/m.exec(run.stderr)?.[1]);
    expect(run.stderr).toContain("saved out/step_2.safetensors");
    expect(run.stderr).toContain("wrote out/final.safetensors");
    // The plan is in the wasm memory, touched by the steps; the rest is the runtime's.
    expect(measured).toBeGreaterThan(plan);
    expect(measured, `peak RSS ${measured} against the banner's ${expected}`).toBeLessThan(1.15 * expected);

    const estimate = await ws.run(["estimate", "-f", "model.yaml"]);
    expect(estimate.code, estimate.stderr).toBe(0);
    expect(estimate.stdout).toContain(`peak           ~${banner![1]} ${banner![2]} RSS expected for the process`);
  }, 120_000);
});
