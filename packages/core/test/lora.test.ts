import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, createReferenceBackend } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import type { ModelConfig } from "../src/model/config.js";
import { paramLayout, trainableLayout } from "../src/model/param-layout.js";
import { buildEvalGraph, buildTrainingGraph } from "../src/model/build-graph.js";
import { Trainer } from "../src/train/trainer.js";
import { planTrainingMemory } from "../src/train/plan-training.js";
import { loadTrainerCheckpoint, saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";
import { fileURLToPath } from "node:url";
import { PretrainedWeights } from "../src/hf/pretrained-weights.js";
import { openPeftAdapter } from "../src/hf/peft-adapter.js";
import { loadFixture, scaledError } from "./support/pytorch-fixture.js";
import { tinyModels } from "./support/tiny-models.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { withLoraSettings } from "../src/settings/lora-settings.js";
import { constantLrConfig } from "./support/trainer-config.js";

const lora = (model: ModelConfig, targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]): ModelConfig => ({ ...model, lora: { rank: 2, alpha: 4, targets } });

function batch(seed: number, n: number, vocab: number) {
  const ids = new Int32Array(n).map((_, i) => (seed * 7 + i * 5) % vocab);
  const targets = new Int32Array(n).map((_, i) => (seed * 3 + i * 11 + 1) % vocab);
  return { ids, targets };
}

describe("LoRA adapters", () => {
  it("adds A (rank, in) and B (out, rank) per target, trained; the base frozen and stored after them", () => {
    const layout = paramLayout(lora(tinyModels.llama), "bf16");
    const q = layout.specs.find((s) => s.name === "model.layers.0.self_attn.q_proj.lora_A.weight")!;
    expect(q.shape).toEqual([2, 24]);
    expect(layout.specs.find((s) => s.name === "model.layers.0.mlp.down_proj.lora_B.weight")!.shape).toEqual([24, 2]);
    expect(layout.specs.filter((s) => !s.frozen).every((s) => s.name.includes(".lora_"))).toBe(true);
    expect(layout.specs.filter((s) => s.frozen).length).toBe(paramLayout(tinyModels.llama).specs.length);
    // GPT-2's Conv1D weights are (in, out): c_fc (16, 64) gets A (2, 16) and B (64, 2).
    const gpt2 = paramLayout(lora(tinyModels.gpt2, ["c_attn", "c_fc"]));
    expect(gpt2.specs.find((s) => s.name === "transformer.h.0.mlp.c_fc.lora_A.weight")!.shape).toEqual([2, 16]);
    expect(gpt2.specs.find((s) => s.name === "transformer.h.0.mlp.c_fc.lora_B.weight")!.shape).toEqual([64, 2]);
    // The trained parameters are the buffer's prefix; the state layout holds them alone.
    const state = trainableLayout(paramLayout(lora(tinyModels.llama), "f32"));
    const firstFrozen = Math.min(...layout.specs.filter((s) => s.frozen).map((s) => paramLayout(lora(tinyModels.llama), "f32").offsets.get(s.name)!));
    expect(state.bytes).toBeLessThanOrEqual(firstFrozen);
    expect(state.specs.length).toBe(3 * 7 * 2);
  });

  it("makes no gradient for a frozen weight, and plans less memory than a full fine-tune", () => {
    const model = lora(tinyModels.llama);
    const g = buildTrainingGraph(model, paramLayout(model), 2, 8);
    const graded = [...g.training!.paramGrads.keys()].map((id) => g.graph.info(id).name);
    expect(graded.length).toBe(42);
    expect(graded.every((n) => n.includes(".lora_"))).toBe(true);
    const full = planTrainingMemory(tinyModels.llama, 2, 8);
    const adapters = planTrainingMemory(model, 2, 8);
    expect(adapters.gradients).toBeLessThan(full.gradients / 4);
    expect(adapters.optimizerState).toBeLessThan(full.optimizerState / 4);
  });

  it("starts from the base model's outputs (B is zero) and trains only the adapters, in bf16 too", async () => {
    for (const dtype of ["f32", "bf16"] as const) {
      const backend = createReferenceBackend();
      const base = new Trainer(backend, { ...constantLrConfig(tinyModels.llama, 2, 8, 5), dtype });
      const tuned = new Trainer(backend, { ...constantLrConfig(lora(tinyModels.llama), 2, 8, 5), dtype });
      const b = batch(1, 16, 24);
      const baseLoss = await base.lossAndGradients(b);
      const before = await tuned.readParameters("params");
      expect(await tuned.lossAndGradients(b)).toBe(baseLoss);
      for (let s = 0; s < 3; s++) await tuned.step([b]);
      const after = await tuned.readParameters("params");
      for (const [name, v] of after) {
        if (name.includes(".lora_")) expect(v, name).not.toEqual(before.get(name));
        else expect(v, name).toEqual(before.get(name));
      }
      expect(await tuned.lossAndGradients(b)).toBeLessThan(baseLoss);
      base.dispose();
      tuned.dispose();
    }
  });

  it("resumes bit-exactly from a checkpoint that holds the frozen bf16 base and the adapters' AdamW state", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-lora-"));
    const config = { ...constantLrConfig(lora(tinyModels.llama), 2, 8, 9), dtype: "bf16" as const };
    const backend = createReferenceBackend();
    const a = new Trainer(backend, config);
    for (let s = 0; s < 2; s++) await a.step([batch(s, 16, 24)]);
    const file = path.join(dir, "step.safetensors");
    await saveTrainerCheckpoint(a, file);
    const b = new Trainer(backend, { ...config, seed: 77 });
    await loadTrainerCheckpoint(b, file);
    for (let s = 2; s < 4; s++) {
      const ra = await a.step([batch(s, 16, 24)]);
      const rb = await b.step([batch(s, 16, 24)]);
      expect(rb.loss).toBe(ra.loss);
    }
    expect(await b.readParameters("master")).toEqual(await a.readParameters("master"));
    a.dispose();
    b.dispose();
    fs.rmSync(dir, { recursive: true });
  });

  it("trains with the default targets of every family kiln builds, and --recompute changes no number", async () => {
    const families: ModelConfig[] = [
      resolveModelConfig({ arch: "qwen2", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, kvHeads: 2, maxSeqLen: 8 }),
      resolveModelConfig({ arch: "qwen3", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, kvHeads: 2, headDim: 6, maxSeqLen: 8 }),
      resolveModelConfig({ arch: "gemma3", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 2, kvHeads: 1, headDim: 8, maxSeqLen: 8, slidingWindow: 4, layerTypes: ["sliding_attention", "full_attention"] }),
      resolveModelConfig({ arch: "mistral", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, kvHeads: 2, maxSeqLen: 8, slidingWindow: 3 }),
      resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, maxSeqLen: 8, kvLatentDim: 6, ropeDim: 2, numExperts: 3, sharedExpert: true, intermediateSize: 12 }),
      resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 16, numLayers: 2, numHeads: 4, maxSeqLen: 8, mambaLayers: [0], mamba2HeadDim: 4, mamba2StateSize: 4, mamba2ChunkSize: 3 }),
      tinyModels.gpt2,
    ];
    for (const base of families) {
      const model = withLoraSettings(base, { loraRank: 2, loraDropout: 0 }, (k) => k);
      const losses: Record<string, number[]> = {};
      for (const recompute of ["none", "blocks"] as const) {
        const t = new Trainer(createReferenceBackend(), { ...constantLrConfig(model, 2, 8, 4), recompute });
        const before = await t.readParameters("params");
        losses[recompute] = [];
        for (let s = 0; s < 3; s++) losses[recompute].push((await t.step([batch(s, 16, 24)])).loss);
        for (const [name, v] of await t.readParameters("params")) {
          if (name.includes(".lora_B")) expect(v.some((x) => x !== 0), `${base.arch} ${name}`).toBe(true);
          if (!name.includes(".lora_")) expect(v, `${base.arch} ${name}`).toEqual(before.get(name));
        }
        t.dispose();
      }
      expect(losses.blocks, base.arch).toEqual(losses.none);
    }
  });

  it("refuses a target the model does not have, or one it does not apply as a linear layer, naming it", () => {
    expect(() => paramLayout(lora(tinyModels.llama, ["q_proj", "qkv"]))).toThrow(ConfigError);
    expect(() => paramLayout(lora(tinyModels.llama, ["qkv"]))).toThrow(expect.objectContaining({ message: expect.stringMatching(/qkv names no weight matrix/), hint: expect.stringMatching(/q_proj, k_proj/) }));
    const embed = lora(tinyModels.llama, ["embed_tokens"]);
    expect(() => buildTrainingGraph(embed, paramLayout(embed), 1, 8)).toThrow(/LoRA cannot wrap model\.embed_tokens\.weight/);
  });
});

describe("PEFT adapter folders", () => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const fixtures = path.join(here, "fixtures");

  it("reads an adapter PEFT saved over its base folder and computes PEFT's logits", async () => {
    const f = await loadFixture("llama-lora-tiny");
    const base = await PretrainedWeights.open(path.join(fixtures, "lora", "llama-base"));
    const { lora, weights: adapter } = await openPeftAdapter(path.join(fixtures, "lora", "llama-adapter"), base.model);
    expect(lora).toEqual({ rank: 3, alpha: 7, targets: ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"] });
    const backend = createReferenceBackend();
    const trainer = new Trainer(backend, constantLrConfig(adapter.model, f.train.batch, f.train.seqLen, 0));
    await trainer.loadParametersFrom((async function* () {
      yield* base.pieces();
      yield* adapter.pieces();
    })());
    const runner = trainer.forwardRunner(f.train.batch, f.train.seqLen);
    await runner.run(f.ids, f.labels);
    expect(scaledError(await runner.logits(), f.tensor("adapter_logits"))).toBeLessThan(1e-5);
    runner.dispose();
    trainer.dispose();
    await base.close();
    await adapter.close();
  });

  it("refuses an adapter of another base, naming the tensor, and PEFT settings kiln does not compute, naming the key", async () => {
    const other = { ...tinyModels.llama, vocabSize: 64, hiddenSize: 32, numLayers: 2, numHeads: 4, kvHeads: 4, intermediateSize: 48 };
    await expect(openPeftAdapter(path.join(fixtures, "lora", "llama-adapter"), other)).rejects.toThrow(/tensor base_model\.model\.model\.layers\.0\.self_attn\.k_proj\.lora_B\.weight has shape \[16, 3\].*\[32, 3\]/);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-peft-"));
    const config = JSON.parse(fs.readFileSync(path.join(fixtures, "lora", "llama-adapter", "adapter_config.json"), "utf8"));
    fs.copyFileSync(path.join(fixtures, "lora", "llama-adapter", "adapter_model.safetensors"), path.join(dir, "adapter_model.safetensors"));
    fs.writeFileSync(path.join(dir, "adapter_config.json"), JSON.stringify({ ...config, use_dora: true }));
    const base = await PretrainedWeights.open(path.join(fixtures, "lora", "llama-base"));
    await expect(openPeftAdapter(dir, base.model)).rejects.toThrow(expect.objectContaining({ message: expect.stringMatching(/^use_dora true: DoRA/), where: path.join(dir, "adapter_config.json") }));
    fs.writeFileSync(path.join(dir, "adapter_config.json"), JSON.stringify({ ...config, target_modules: ["q_proj"] }));
    await expect(openPeftAdapter(dir, base.model)).rejects.toThrow(/tensor base_model\.model\.model\.layers\.0\.mlp\.down_proj\.lora_A\.weight is not an adapter of this base model/);
    await base.close();
    fs.rmSync(dir, { recursive: true });
  });
});

describe("LoRA dropout", () => {
  const dropped = (m: ModelConfig, p = 0.25): ModelConfig => ({ ...m, lora: { rank: 2, alpha: 4, targets: ["q_proj", "v_proj", "down_proj"], dropout: p } });
  // B starts at zero, so the branch adds nothing at first: weights after a few steps make the masks show in the loss too.
  async function trained(config: ReturnType<typeof constantLrConfig>, backend = createReferenceBackend()) {
    const t = new Trainer(backend, config);
    for (let s = 0; s < 3; s++) await t.step([batch(s, 16, 24)]);
    return t;
  }

  it("drops each adapter's input while training, the same masks on WebAssembly as on the f64 reference, none in evaluation", async () => {
    const config = constantLrConfig(dropped(tinyModels.llama), 2, 8, 5);
    const wasm = await createWasmBackend({ threads: 2, measurePeak: false });
    const [ref, onWasm] = [await trained(config), await trained(config, wasm)];
    const plain = await trained(constantLrConfig({ ...tinyModels.llama, lora: { rank: 2, alpha: 4, targets: ["q_proj", "v_proj", "down_proj"] } }, 2, 8, 5));
    const b = batch(9, 16, 24);
    const [lr, lw, lp] = [await ref.lossAndGradients(b), await onWasm.lossAndGradients(b), await plain.lossAndGradients(b)];
    expect(Math.abs(lw - lr) / lr).toBeLessThan(1e-5);
    expect(lp).not.toBe(lr);
    const [gr, gw, gp] = [await ref.readParameters("grads"), await onWasm.readParameters("grads"), await plain.readParameters("grads")];
    for (const [name, g] of gr) expect(scaledError(gw.get(name)!, g), name).toBeLessThan(1e-4);
    // The adapters' gradients see the dropped inputs: far from those without dropout.
    for (const name of [...gr.keys()].filter((n) => n.includes("lora_B"))) expect(scaledError(gp.get(name)!, gr.get(name)!), name).toBeGreaterThan(0.05);
    // A dropout node (and its backward) per adapter in training; evaluation runs the adapters whole
    const layout = paramLayout(config.model);
    const count = (g: { nodes: { attrs: unknown }[] }) => g.nodes.filter((n) => (n.attrs as { kernel?: string }).kernel === "dropout").length;
    const adapters = layout.specs.filter((s) => s.name.endsWith("lora_A.weight")).length;
    // (but layer 0's q_proj and v_proj: only frozen weights lie before their input, which wants no gradient).
    expect(count(buildTrainingGraph(config.model, layout, 2, 8).graph)).toBe(2 * adapters - 2);
    expect(count(buildEvalGraph(config.model, layout, 2, 8).graph)).toBe(0);
    const runner = ref.forwardRunner(2, 8);
    const noDropout = new Trainer(createReferenceBackend(), { ...config, model: { ...config.model, lora: { ...config.model.lora!, dropout: undefined } } });
    noDropout.loadParameters(await ref.readParameters("params"));
    expect(await runner.run(b.ids, b.targets)).toBeCloseTo(16 * (await noDropout.lossAndGradients(b)), 4);
    // Each step draws new masks: the same weights and batch at another step give another loss.
    const again = new Trainer(createReferenceBackend(), config);
    again.loadParameters(await ref.readParameters("params"));
    again.stepCount = ref.stepCount + 1;
    expect(await again.lossAndGradients(b)).not.toBe(lr);
    for (const t of [ref, onWasm, plain, noDropout, again]) t.dispose();
    wasm.dispose();
  });

  it("resumes bit-exactly: the masks follow from the run's seed and the step", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-lora-dropout-"));
    const config = { ...constantLrConfig(dropped(tinyModels.llama, 0.1), 2, 8, 9), dtype: "bf16" as const };
    const a = await trained(config);
    const file = path.join(dir, "step.safetensors");
    await saveTrainerCheckpoint(a, file);
    const b = new Trainer(createReferenceBackend(), config);
    await loadTrainerCheckpoint(b, file);
    for (let s = 3; s < 5; s++) expect((await b.step([batch(s, 16, 24)])).loss).toBe((await a.step([batch(s, 16, 24)])).loss);
    expect(await b.readParameters("master")).toEqual(await a.readParameters("master"));
    a.dispose();
    b.dispose();
    fs.rmSync(dir, { recursive: true });
  });

  it("is written to and read from a PEFT adapter's lora_dropout", async () => {
    const model = dropped(tinyModels.llama, 0.05);
    const { peftAdapterConfig } = await import("../src/hf/peft-adapter.js");
    expect(peftAdapterConfig(model as ModelConfig & { lora: NonNullable<ModelConfig["lora"]> }, null).lora_dropout).toBe(0.05);
  });
});

describe("a LoRA checkpoint resumed without its adapters", () => {
  it("is refused naming the LoRA flags it was trained with", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-lora-resume-"));
    const backend = createReferenceBackend();
    const tuned = new Trainer(backend, constantLrConfig(lora(tinyModels.llama), 2, 8, 1));
    const file = path.join(dir, "step.safetensors");
    await saveTrainerCheckpoint(tuned, file);
    const plain = new Trainer(backend, constantLrConfig(tinyModels.llama, 2, 8, 1));
    await expect(loadTrainerCheckpoint(plain, file)).rejects.toThrow(
      expect.objectContaining({ hint: expect.stringContaining("LoRA --lora-rank 2 --lora-alpha 4 --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj (this run: no LoRA)") }),
    );
    tuned.dispose();
    plain.dispose();
    fs.rmSync(dir, { recursive: true });
  });
});
