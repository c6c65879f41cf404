import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { exportHfFolder } from "../src/hf/export-hf-folder.js";
import { PretrainedWeights } from "../src/hf/pretrained-weights.js";
import type { ModelConfig } from "../src/model/config.js";
import { Trainer } from "../src/train/trainer.js";
import { referenceLogits, runHfReference, torchMissing } from "./support/hf-reference.js";
import { TINY_GPT2, TINY_LLAMA, randomWeights, writeKilnCheckpoint } from "./support/hf-folders.js";
import { scaledError } from "./support/pytorch-fixture.js";

// kiln's export read by transformers' own forward pass (tooling/fixtures/hf_reference.py,
// which follows modeling_gpt2.py and modeling_llama.py): the logits agree to 1e-5.

const missing = torchMissing();
const BATCH = 2;
const SEQ = 8;
const IDS = [
  [3, 1, 4, 1, 5, 9, 2, 6],
  [5, 3, 5, 8, 9, 7, 9, 3],
];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-hf-parity-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** kiln's logits for IDS with `weights` on the CPU backend. */
async function kilnLogits(model: ModelConfig, weights: Map<string, Float32Array>): Promise<Float32Array> {
  const backend = await createWasmBackend({ threads: 1, measurePeak: false });
  const trainer = new Trainer(backend, {
    model,
    batchSize: BATCH,
    seqLen: SEQ,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0, gradClip: 1 },
    schedule: { kind: "constant", peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 1 },
    seed: 0,
  });
  trainer.loadParameters(weights);
  const runner = trainer.forwardRunner(BATCH, SEQ);
  await runner.run(Int32Array.from(IDS.flat()));
  const logits = await runner.logits();
  runner.dispose();
  trainer.dispose();
  backend.dispose();
  return logits;
}

async function readWeights(location: string) {
  const source = await PretrainedWeights.open(location);
  try {
    return { model: source.model, weights: await source.read() };
  } finally {
    await source.close();
  }
}

describe("an exported folder in transformers' forward pass (PyTorch)", () => {
  const llamaTied = { ...TINY_LLAMA, tieEmbeddings: true, ropeTheta: 5e5, normEps: 1e-5 };
  for (const [label, model] of [
    ["GPT2LMHeadModel", TINY_GPT2],
    ["LlamaForCausalLM (GQA, untied)", TINY_LLAMA],
    ["LlamaForCausalLM (tied, rope_theta 5e5)", llamaTied],
  ] as const) {
    it(`${label}: kiln's logits to 1e-5`, async (ctx) => {
      if (missing) ctx.skip(missing);
      const weights = randomWeights(model, 7);
      const name = label.replace(/\W+/g, "-");
      await writeKilnCheckpoint(path.join(dir, `${name}.safetensors`), model, weights);
      await exportHfFolder(path.join(dir, `${name}.safetensors`), path.join(dir, name));
      const expected = referenceLogits(path.join(dir, name), IDS);
      expect(expected.length).toBe(BATCH * SEQ * model.vocabSize);
      expect(scaledError(await kilnLogits(model, weights), expected)).toBeLessThan(1e-5);
    });
  }

  it("a GPT-2 folder laid out as the original upload (Conv1D, no transformer. prefix, mask buffers) gives transformers' logits in kiln", async (ctx) => {
    if (missing) ctx.skip(missing);
    const folder = path.join(dir, "gpt2-upload");
    runHfReference("write-gpt2", folder, JSON.stringify({ n_embd: 32, n_layer: 2, n_head: 4, n_positions: 16, n_ctx: 16, vocab_size: 64 }), "1");
    const { model, weights } = await readWeights(folder);
    expect(model).toMatchObject({ arch: "gpt2", hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16, vocabSize: 64, intermediateSize: 128, tieEmbeddings: true });
    expect(scaledError(await kilnLogits(model, weights), referenceLogits(folder, IDS))).toBeLessThan(1e-5);
  });
});
