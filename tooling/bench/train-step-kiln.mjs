// One training configuration in kiln on the wasm backend, timed: prints one JSON line.
// Usage: node train-step-kiln.mjs --layers 4 --heads 4 --hidden 256 --vocab 4096 --seq 128 --batch 8 --steps 10 --threads 2 [--dtype f32|bf16|f16]
// Needs the workspace built (pnpm turbo run build).
import { parseArgs } from "node:util";
import { Trainer, resolveModelConfig, trainingFlopsPerToken } from "../../packages/core/dist/index.js";
import { createWasmBackend } from "../../packages/kernels-wasm/dist/index.js";

const { values } = parseArgs({
  options: Object.fromEntries(["layers", "heads", "hidden", "vocab", "seq", "batch", "steps", "warmup", "threads", "dtype"].map((k) => [k, { type: "string" }])),
});
const n = (k, d) => Number(values[k] ?? d);
const a = { layers: n("layers", 4), heads: n("heads", 4), hidden: n("hidden", 256), vocab: n("vocab", 4096), seq: n("seq", 128), batch: n("batch", 8), steps: n("steps", 10), warmup: n("warmup", 3), threads: n("threads", 2) };

const model = resolveModelConfig({ arch: "gpt2", vocabSize: a.vocab, hiddenSize: a.hidden, numLayers: a.layers, numHeads: a.heads, maxSeqLen: a.seq });
const backend = await createWasmBackend({ threads: a.threads });
const trainer = new Trainer(backend, {
  model,
  batchSize: a.batch,
  seqLen: a.seq,
  optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
  schedule: { kind: "constant", peak: 3e-4, min: 3e-4, warmupSteps: 0, maxSteps: 1 },
  seed: 0,
  dtype: values.dtype ?? "f32",
});
let s = 1;
const rand = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) % a.vocab);
const batch = { ids: Int32Array.from({ length: a.batch * a.seq }, rand), targets: Int32Array.from({ length: a.batch * a.seq }, rand) };
// Every step's time from the first (cold) one; the mean is over the steps after the warmup.
const stepMs = [];
const timedStep = async () => {
  const t = performance.now();
  const r = await trainer.step([batch]);
  stepMs.push(performance.now() - t);
  return r.loss;
};
for (let i = 0; i < a.warmup; i++) await timedStep();
let loss = 0;
for (let i = 0; i < a.steps; i++) loss = await timedStep();
const seconds = stepMs.slice(a.warmup).reduce((x, y) => x + y, 0) / 1000 / a.steps;
const tokensPerSecond = (a.batch * a.seq) / seconds;
console.log(
  JSON.stringify({
    impl: "kiln",
    backend: backend.capabilities().device.name,
    threads: a.threads,
    ms_per_step: seconds * 1000,
    step_ms: stepMs,
    tokens_per_s: tokensPerSecond,
    effective_gflops: (tokensPerSecond * trainingFlopsPerToken(model, a.seq)) / 1e9,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    dtype: trainer.dtype,
    planned_bytes: trainer.memoryPlan.total,
    measured_peak_bytes: backend.memoryStats().peakBytes,
    loss,
    params: trainer.layout.count,
  }),
);
trainer.dispose();
backend.dispose();
process.exit(0);
