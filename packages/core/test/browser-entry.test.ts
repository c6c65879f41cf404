import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { InferenceSession } from "../src/generate/inference-session.js";
import { encodeTrainerCheckpoint, restoreTrainerState, tensorSourceOfBytes, TokenGenerator, Trainer, resolveModelConfig, type TrainerConfig } from "../src/browser.js";
import { saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";

const entry = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src/browser.ts");

const config: TrainerConfig = {
  model: resolveModelConfig({ arch: "gpt2", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, maxSeqLen: 8 }),
  batchSize: 2,
  seqLen: 8,
  optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
  schedule: { kind: "cosine", peak: 3e-3, min: 3e-4, warmupSteps: 2, maxSteps: 8 },
  seed: 7,
};

const batchAt = (step: number) => {
  const ids = Int32Array.from({ length: 16 }, (_, i) => (i * 5 + step * 3) % 24);
  const targets = Int32Array.from({ length: 16 }, (_, i) => (i * 5 + step * 3 + 1) % 24);
  return [{ ids, targets }];
};

describe("@kiln/core/browser", () => {
  it("bundles for a browser with no Node module in it", async () => {
    const out = await build({ entryPoints: [entry], bundle: true, platform: "browser", format: "esm", write: false, external: ["gpt-tokenizer/*"], logLevel: "silent" });
    const code = out.outputFiles[0].text;
    expect(code).not.toMatch(/["']node:|from ["'](fs|path|os)["']/);
    expect(code).toMatch(/\bTrainer\b/);
  });

  it("encodes the bytes saveTrainerCheckpoint writes, and restores a trainer and a generator from them", async () => {
    const trainer = new Trainer(createReferenceBackend(), config);
    for (let s = 0; s < 3; s++) await trainer.step(batchAt(s));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-browser-entry-"));
    const file = path.join(dir, "step_3.safetensors");
    try {
      await saveTrainerCheckpoint(trainer, file, { "kiln.tokenizer": "bytes" });
      const bytes = await encodeTrainerCheckpoint(trainer, { "kiln.tokenizer": "bytes" });
      expect(Buffer.from(bytes).equals(fs.readFileSync(file))).toBe(true);

      const restored = new Trainer(createReferenceBackend(), { ...config, seed: 99 });
      const meta = await restoreTrainerState(restored, tensorSourceOfBytes(bytes, "step_3.safetensors"), "step_3.safetensors");
      expect(meta["kiln.tokenizer"]).toBe("bytes");
      expect(restored.stepCount).toBe(3);
      expect((await restored.step(batchAt(3))).loss).toBe((await trainer.step(batchAt(3))).loss);

      const options = { temperature: 0.8, topK: 5, seed: 3 };
      const fromBytes = await TokenGenerator.fromTensors(createReferenceBackend(), tensorSourceOfBytes(bytes), "bytes");
      const fromFile = await InferenceSession.fromCheckpoint(createReferenceBackend(), file);
      expect(await fromBytes.generate([1, 2, 3], 12, options, () => true)).toEqual(await fromFile.generate([1, 2, 3], 12, options, () => true));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
