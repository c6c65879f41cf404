// LoRA against full fine-tuning of the same model on the CPU backend (wasm kernels, native
// GEMM where built): each run in its own process (so its peak RSS is its own), runs
// alternating (full, lora, lora, full, ...); per run the steps are timed from a cold start,
// the first included, and the report gives the median step time and peak RSS of each mode,
// the planned memory by component, and the ratios.
// The default model has Qwen2.5-0.5B's shape (qwen2: 24 layers, hidden 896, 14 heads, 2
// key/value heads, intermediate 4864, vocabulary 151936, tied), weights random (the step
// costs the same); LoRA rank 8, alpha 16, on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.
// A run the CPU backend's 4 GiB WebAssembly heap cannot hold is reported as refused, with its plan.
// Usage: node tooling/bench/lora-vs-full.mjs [--model qwen2.5-0.5b|small] [--layers N] [--seq 256] [--batch 1]
//        [--steps 3] [--rounds 2] [--rank 8] [--threads 2] [--dtype f32|bf16]
// Needs the workspace built (pnpm turbo run build).
import { execFileSync } from "node:child_process";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const MODELS = {
  "qwen2.5-0.5b": { arch: "qwen2", vocabSize: 151936, hiddenSize: 896, numLayers: 24, numHeads: 14, kvHeads: 2, intermediateSize: 4864, maxSeqLen: 1024, ropeTheta: 1e6, normEps: 1e-6, tieEmbeddings: true },
  small: { arch: "qwen2", vocabSize: 4096, hiddenSize: 256, numLayers: 4, numHeads: 4, kvHeads: 2, intermediateSize: 704, maxSeqLen: 1024, tieEmbeddings: true },
};
const TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

const { values } = parseArgs({ options: Object.fromEntries(["model", "layers", "seq", "batch", "steps", "rounds", "rank", "threads", "dtype", "child"].map((k) => [k, { type: "string" }])) });
const a = {
  model: values.model ?? "qwen2.5-0.5b",
  layers: values.layers === undefined ? undefined : Number(values.layers),
  seq: Number(values.seq ?? 256),
  batch: Number(values.batch ?? 1),
  steps: Number(values.steps ?? 3),
  rounds: Number(values.rounds ?? 2),
  rank: Number(values.rank ?? 8),
  threads: Number(values.threads ?? 2),
  dtype: values.dtype ?? "f32",
};
if (!MODELS[a.model]) throw new Error(`unknown --model ${a.model}: use ${Object.keys(MODELS).join(" or ")}`);

if (values.child) {
  // One run: build the trainer, time each step from the first.
  const { Trainer, planTrainingMemory, resolveModelConfig } = await import("../../packages/core/dist/index.js");
  const { createWasmBackend } = await import("../../packages/kernels-wasm/dist/index.js");
  const base = resolveModelConfig({ ...MODELS[a.model], ...(a.layers ? { numLayers: a.layers } : {}) });
  const model = values.child === "lora" ? { ...base, lora: { rank: a.rank, alpha: 2 * a.rank, targets: TARGETS } } : base;
  const backend = await createWasmBackend({ threads: a.threads });
  const make = () => new Trainer(backend, {
    model,
    batchSize: a.batch,
    seqLen: a.seq,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "constant", peak: 1e-4, min: 1e-4, warmupSteps: 0, maxSteps: a.steps },
    seed: 0,
    dtype: a.dtype,
  });
  let trainer;
  try {
    trainer = make();
  } catch (err) {
    // The CPU backend's memory is one WebAssembly heap of at most 4 GiB: a run that needs more is refused, and its plan says by how much.
    if (err?.name !== "MemoryError") throw err;
    console.log(JSON.stringify({ refused: err.message, plan: planTrainingMemory(model, a.batch, a.seq, a.dtype, "cheap"), backend: backend.capabilities().device.name }));
    process.exit(0);
  }
  let s = 1;
  const rand = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) % base.vocabSize);
  const batch = { ids: Int32Array.from({ length: a.batch * a.seq }, rand), targets: Int32Array.from({ length: a.batch * a.seq }, rand) };
  const ms = [];
  for (let i = 0; i < a.steps; i++) {
    const t0 = performance.now();
    await trainer.step([batch]);
    ms.push(performance.now() - t0);
  }
  const trained = trainer.stateLayout.count;
  console.log(JSON.stringify({ ms, peak_rss_bytes: process.resourceUsage().maxRSS * 1024, plan: trainer.memoryPlan, params: trainer.layout.count, trained, backend: backend.capabilities().device.name }));
  trainer.dispose();
  backend.dispose();
  process.exit(0);
}

const self = fileURLToPath(import.meta.url);
const flags = Object.entries(a).flatMap(([k, v]) => (v === undefined ? [] : [`--${k}`, String(v)]));
const runs = { full: [], lora: [] };
for (let r = 0; r < a.rounds; r++) {
  for (const mode of r % 2 === 0 ? ["full", "lora"] : ["lora", "full"]) {
    const out = execFileSync(process.execPath, [self, ...flags, "--child", mode], { encoding: "utf8", maxBuffer: 1 << 24 });
    runs[mode].push(JSON.parse(out.trim().split("\n").at(-1)));
  }
}
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const summary = (rs) =>
  rs.every((r) => r.refused) ? { refused: rs[0].refused, planned: rs[0].plan } : {
  step_ms_median: median(rs.flatMap((r) => r.ms)),
  step_ms_best: Math.min(...rs.flatMap((r) => r.ms)),
  first_step_ms_median: median(rs.map((r) => r.ms[0])),
  peak_rss_bytes_median: median(rs.map((r) => r.peak_rss_bytes)),
  planned: rs[0].plan,
  parameters: rs[0].params,
  trained_parameters: rs[0].trained,
};
const full = summary(runs.full);
const lora = summary(runs.lora);
console.log(
  JSON.stringify(
    {
      model: a.model,
      machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`,
      backend: runs.full[0].backend,
      command: `node tooling/bench/lora-vs-full.mjs ${flags.join(" ")}`,
      lora_rank: a.rank,
      steps_timed_each: a.steps * a.rounds,
      full,
      lora,
      ...(full.refused || lora.refused ? {} : { lora_over_full_step_time: lora.step_ms_median / full.step_ms_median, lora_over_full_peak_rss: lora.peak_rss_bytes_median / full.peak_rss_bytes_median }),
      lora_over_full_planned_memory: lora.planned.total / full.planned.total,
    },
    null,
    2,
  ),
);
