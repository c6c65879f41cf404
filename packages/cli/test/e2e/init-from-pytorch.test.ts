import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runHfReference, torchMissing } from "../../../core/test/support/hf-reference.js";
import { metricsLog } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A GPT-2 folder as PyTorch lays it out (tooling/fixtures/hf_reference.py: Conv1D weights,
// no transformer. prefix, attention-mask buffers) fine-tunes in kiln.

const missing = torchMissing();
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("init-from-pytorch");
});
afterEach(() => ws.remove());

describe("kiln train --init-from a folder PyTorch wrote", () => {
  it("GPT-2: 20 steps of fine-tuning, the loss falling", async (ctx) => {
    if (missing) ctx.skip(missing);
    runHfReference("write-gpt2", ws.path("gpt2"), JSON.stringify({ n_embd: 32, n_layer: 2, n_head: 4, n_positions: 16, n_ctx: 16, vocab_size: 256 }), "5");
    await ws.writeTokens("data.bin", textTokens(3000));
    await ws.write("finetune.yaml", "trainer: { batch_size: 4, max_steps: 20, learning_rate: 0.003, lr_schedule: constant, log_interval: 1, eval_interval: 1000, eval_iters: 1 }\n");
    const r = expectSuccess(await ws.run(["train", "-f", "finetune.yaml", "--init-from", "gpt2", "-d", "data.bin", "--output-dir", "out", "--headless"]), "fine-tuning");
    expect(r.stderr).toContain("weights from gpt2 (optimizer state fresh)");
    const losses = (await metricsLog(ws.path("out"))).filter((l) => "loss" in l).map((l) => l.loss as number);
    expect(losses).toHaveLength(20);
    // GPT-2's initialisation predicts all 256 bytes nearly alike: the first loss is near ln 256.
    expect(Math.abs(losses[0] - Math.log(256))).toBeLessThan(0.1);
    expect(losses[19]).toBeLessThan(losses[0] - 1);
  });
});
