import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Backend } from "@kiln/contract";
import { readSafetensors } from "../../src/checkpoint/safetensors-file.js";
import { type ModelConfig } from "../../src/model/config.js";
import { Trainer } from "../../src/train/trainer.js";

const here = path.dirname(fileURLToPath(import.meta.url));

/** A fixture written by tooling/fixtures/make_fixtures.py (PyTorch, float64). */
export interface PytorchFixture {
  config: ModelConfig;
  train: { lr: number; beta1: number; beta2: number; eps: number; weightDecay: number; gradClip: number; warmupSteps: number; maxSteps: number; minLr: number; batch: number; seqLen: number; loadBalanceAlpha?: number };
  tensor(name: string): Float32Array;
  ids: Int32Array;
  labels: Int32Array;
  paramNames: string[];
  /** The parameters PyTorch trained (every one, or a LoRA model's adapters alone): those with a `grad.` tensor. */
  gradNames: string[];
}

export type FixtureName =
  | "gpt2-tiny"
  | "llama-tiny"
  | "llama-moe-tiny"
  | "llama-mla-tiny"
  | "llama-hybrid-tiny"
  | "llama-mamba3-tiny"
  | "llama-mamba3-mimo-tiny"
  | "llama-lora-tiny"
  | "gpt2-lora-tiny";

export async function loadFixture(name: FixtureName): Promise<PytorchFixture> {
  const file = await readSafetensors(path.join(here, "..", "fixtures", `${name}.safetensors`));
  const raw = (n: string) => {
    const t = file.tensors.get(n);
    if (!t) throw new Error(`fixture ${name} has no tensor ${n}`);
    return t.data.slice().buffer;
  };
  const config = JSON.parse(file.metadata.config) as ModelConfig;
  return {
    config,
    train: JSON.parse(file.metadata.train),
    tensor: (n) => new Float32Array(raw(n)),
    ids: new Int32Array(raw("input_ids")),
    labels: new Int32Array(raw("labels")),
    paramNames: [...file.tensors.keys()].filter((n) => n.startsWith("after5.")).map((n) => n.slice("after5.".length)),
    gradNames: [...file.tensors.keys()].filter((n) => n.startsWith("grad.")).map((n) => n.slice("grad.".length)),
  };
}

/** A trainer set up exactly as the fixture's PyTorch run, with its initial weights loaded. */
export function fixtureTrainer(f: PytorchFixture, backend: Backend): Trainer {
  const t = f.train;
  const trainer = new Trainer(backend, {
    model: f.config,
    batchSize: t.batch,
    seqLen: t.seqLen,
    optimizer: { beta1: t.beta1, beta2: t.beta2, eps: t.eps, weightDecay: t.weightDecay, gradClip: t.gradClip },
    schedule: { kind: "cosine", peak: t.lr, min: t.minLr, warmupSteps: t.warmupSteps, maxSteps: t.maxSteps },
    seed: 0,
    ...(t.loadBalanceAlpha === undefined ? {} : { loadBalanceAlpha: t.loadBalanceAlpha }),
  });
  trainer.loadParameters(new Map(f.paramNames.map((n) => [n, f.tensor(n)])));
  return trainer;
}

/** Largest |actual - expected| relative to the largest |expected| of the tensor. */
export function scaledError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let maxErr = 0;
  let scale = 0;
  for (let i = 0; i < expected.length; i++) {
    maxErr = Math.max(maxErr, Math.abs(actual[i] - expected[i]));
    scale = Math.max(scale, Math.abs(expected[i]));
  }
  return scale === 0 ? maxErr : maxErr / scale;
}

/** ||actual - expected|| / ||expected|| (Euclidean norms over the tensor). */
export function normError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let diff = 0;
  let norm = 0;
  for (let i = 0; i < expected.length; i++) {
    diff += (actual[i] - expected[i]) ** 2;
    norm += expected[i] ** 2;
  }
  return norm === 0 ? Math.sqrt(diff) : Math.sqrt(diff / norm);
}
