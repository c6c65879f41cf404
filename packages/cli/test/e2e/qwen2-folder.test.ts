import { cp, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSafetensors } from "@kiln/core";
import { differingTensors, readCheckpoint } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// A Qwen2 folder transformers saved (packages/core/test/fixtures/hf/qwen2-tiny, written by
// tooling/fixtures/hf_family_fixtures.py with the loss transformers computes beside it):
// kiln eval gives that loss, and a run that makes no update exports the same tensors as a
// Qwen2ForCausalLM folder.
const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../core/test/fixtures/hf/qwen2-tiny");

let ws: Workspace;
let reference: { loss: number; sequence: Uint32Array; seqLen: number };
beforeAll(async () => {
  ws = await Workspace.create("qwen2");
  await cp(FIXTURE, ws.path("qwen2"), { recursive: true });
  const r = await openSafetensors(path.join(FIXTURE, "reference.safetensors"));
  const f32 = async (n: string) => new Float32Array((await r.read(n)).data.slice().buffer);
  reference = { loss: (await f32("loss"))[0], sequence: Uint32Array.from(await f32("sequence")), seqLen: Number(r.metadata.seq_len) };
  await r.close();
  await ws.writeTokens("data.bin", reference.sequence);
});
afterAll(() => ws.remove());

describe("a Qwen2 folder from transformers", () => {
  it("kiln eval gives the loss transformers computes, to 1e-5", async () => {
    const r = expectSuccess(await ws.run(["eval", "--checkpoint", "qwen2", "-d", "data.bin", "--seq-len", String(reference.seqLen), "--json"]), "kiln eval");
    const got = JSON.parse(r.stdout) as { loss: number; windows: number };
    expect(got.windows).toBe((reference.sequence.length - 1) / reference.seqLen);
    expect(Math.abs(got.loss - reference.loss) / reference.loss).toBeLessThan(1e-5);
  });

  it("--init-from, a step at learning rate 1e-30, kiln export: the same tensors bit for bit, as Qwen2ForCausalLM", async () => {
    await ws.write("ft.yaml", "trainer: { batch_size: 1, seq_len: 7, max_steps: 1, learning_rate: 1.0e-30, lr_schedule: constant, warmup_steps: 0, weight_decay: 0, log_interval: 1, eval_interval: 1000, eval_iters: 1 }\n");
    await ws.writeTokens("train.bin", Uint32Array.from({ length: 400 }, (_, i) => (i * 7 + 3) % 61));
    expectSuccess(await ws.run(["train", "-f", "ft.yaml", "--init-from", "qwen2", "-d", "train.bin", "--output-dir", "out", "--headless"]), "kiln train");
    expectSuccess(await ws.run(["export", "--checkpoint", "out/final.safetensors", "--out", "exported"]), "kiln export");
    const config = JSON.parse(await readFile(ws.path("exported", "config.json"), "utf8")) as Record<string, unknown>;
    expect(config).toMatchObject({ architectures: ["Qwen2ForCausalLM"], model_type: "qwen2", num_key_value_heads: 2, tie_word_embeddings: false, use_sliding_window: false });
    const original = await readCheckpoint(ws.path("qwen2", "model.safetensors"));
    const exported = await readCheckpoint(ws.path("exported", "model.safetensors"));
    expect([...exported.tensors.keys()].sort()).toEqual([...original.tensors.keys()].sort());
    expect(differingTensors(original, exported)).toEqual([]);
  });
});
