// GPU benchmark of @kiln/kernels-cuda: GEMM TFLOP/s per dtype (4096^3), the grouped
// GEMMs of a mixture-of-experts layer beside one dense GEMM of the same size, causal
// attention forward/backward (and a sliding window of 128 beside full attention at seq 1024), and training steps of bench-small and gpt2-small
// (f32 and bf16; gpt2-small-accum8: bf16 with models/gpt2-small.yaml's 8 micro-batches
// a step, kiln only) with MFU and the step's roofline (each of its kernel calls at the card's
// peak FLOP/s or memory bandwidth, whichever binds), each beside the same work through PyTorch on the same
// GPU (cuda_kernels_torch.py, train_step_torch.py) as a ratio kiln / PyTorch; Mamba2's
// selective scan (ssdScanForward / ssdScanBackward) and the token embedding's backward
// (ids uniform, and ids as frequent as the words of text) on their own, with no PyTorch figure.
// Prints one JSON object. On a machine without a usable GPU it says so and exits 0.
// Needs the workspace built (pnpm turbo run build) with nvcc present; the PyTorch
// side runs when `$KILN_TORCH_PYTHON` (default python3) imports a CUDA torch.
// Usage: node tooling/bench/cuda.mjs [--calls 20] [--steps 10] [--device 0] [--skip-train] [--only gemm,grouped,attention,ssd,embedding,train]
//   [--models gpt2-small:bf16,nano]   (training steps of these models, or model:dtype pairs, alone)
//   [--graphs]   (training steps with each micro-batch one CUDA graph: kiln train --cuda-graphs)
//   [--loss-chunk-mib N]   (training steps whose loss takes its logits in chunks of at most N MiB, not the GPU default)
// --only runs the named parts alone (one process a part keeps a kernel that breaks the device from costing the others).
// Figures: the first (cold) call, then the median and best of --calls timed calls,
// each synchronised, so a figure is what one call costs a user. Inputs are random.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { encodeToBytes, kernelSpecs, ssdStateElements } from "../../packages/contract/dist/index.js";
import { StepProfiler, Trainer, resolveModelConfig, stepRoofline, trainingFlopsPerToken, trainingStepCosts } from "../../packages/core/dist/index.js";
import { createCudaBackend, cudaStatus, gpuProfileForName } from "../../packages/kernels-cuda/dist/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { calls: { type: "string" }, steps: { type: "string" }, device: { type: "string" }, "skip-train": { type: "boolean" }, only: { type: "string" }, models: { type: "string" }, graphs: { type: "boolean" }, "loss-chunk-mib": { type: "string" } } });
const PARTS = ["gemm", "grouped", "attention", "ssd", "embedding", "train"];
const only = values.only ? values.only.split(",").map((p) => p.trim()) : PARTS.filter((p) => p !== "train" || !values["skip-train"]);
for (const part of only) if (!PARTS.includes(part)) throw new Error(`cuda.mjs: --only ${part}: not a part; the parts are ${PARTS.join(", ")}`);
const runs = (part) => only.includes(part);
const wantedModels = values.models?.split(",").map((m) => m.trim());
const lossChunkBytes = values["loss-chunk-mib"] === undefined ? undefined : Number(values["loss-chunk-mib"]) * 2 ** 20;
const trainWanted = (name, dtype) => !wantedModels || wantedModels.includes(name) || wantedModels.includes(`${name}:${dtype}`);
const CALLS = Number(values.calls ?? 20);
const STEPS = Number(values.steps ?? 10);
const DEVICE = Number(values.device ?? 0);

const status = cudaStatus();
if (!status.addon.built || status.runtime.deviceCount === 0) {
  console.log(JSON.stringify({ gpu: false, reason: status.addon.built ? status.runtime.error || status.driver.detail : status.addon.detail }));
  process.exit(0);
}

const backend = createCudaBackend({ device: DEVICE });
const caps = backend.capabilities();
/** Each figure to stderr as it is taken, so a run cut short still shows what it measured. */
const progress = (result) => (console.error(JSON.stringify(result)), result);
const matmulPath = (b) => (b.capabilities().device.libraries?.startsWith("matmul: cuBLASLt") ? "cublaslt" : "kiln");
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Seconds of the first call, then median and best of CALLS calls, each waited for. */
async function time(fn, on = backend) {
  let t = performance.now();
  fn();
  await on.synchronize();
  const cold = (performance.now() - t) / 1000;
  const each = [];
  for (let i = 0; i < CALLS; i++) {
    t = performance.now();
    fn();
    await on.synchronize();
    each.push((performance.now() - t) / 1000);
  }
  // Back to back, one wait at the end: what a call costs inside a training step.
  t = performance.now();
  for (let i = 0; i < CALLS; i++) fn();
  await on.synchronize();
  const pipelined = (performance.now() - t) / 1000 / CALLS;
  return { cold, median: median(each), best: Math.min(...each), pipelined };
}

const BYTES = { f32: 4, bf16: 2, f16: 2 };
let seed = 12345;
/** A buffer of uniform values in [-1, 1) (never constants: they hide wrong indexing and can run faster). */
function filled(dtype, elements, on = backend) {
  const buf = on.alloc(elements * BYTES[dtype]);
  const values = new Float32Array(elements);
  for (let i = 0; i < elements; i++) values[i] = ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 31) - 1;
  on.upload(buf, encodeToBytes(values, dtype));
  return buf;
}

/** Deterministic 32-bit integers (a linear congruential generator) from `seed`: the token ids of the benchmarks. */
function lcg(seed) {
  let s = seed;
  return () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0);
}

/** The last JSON line of a PyTorch reference script, or why it could not run. */
function torchReference(script, args) {
  const python = process.env.KILN_TORCH_PYTHON || "python3";
  try {
    const text = execFileSync(python, [path.join(here, script), ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return JSON.parse(text.trim().split("\n").at(-1));
  } catch (err) {
    return { error: String(err.stderr || err.message).trim().split("\n").slice(-3).join(" | ") };
  }
}

/** One GEMM through `on` (a backend whose matmuls take the path named `path`). */
async function gemm(dtype, on = backend, path = matmulPath(backend), size = 4096) {
  const a = filled(dtype, size * size, on), b = filled(dtype, size * size, on), c = filled(dtype, size * size, on);
  const t = await time(() => on.kernels.matmul({ a, b, c, m: size, n: size, k: size, dtype }), on);
  [a, b, c].forEach((x) => on.free(x));
  const flops = 2 * size ** 3;
  const peak = caps.peakFlops[dtype];
  return progress({ dtype, size, kernel: path, tflops_median: flops / t.median / 1e12, tflops_best: flops / t.best / 1e12, tflops_pipelined: flops / t.pipelined / 1e12, cold_ms: t.cold * 1e3, fraction_of_peak: peak ? flops / t.median / peak : null });
}

/**
 * The experts' matmuls of a mixture-of-experts layer (rows sorted by expert, equal
 * shares, offsets on the device): groupedMatmul with torch Linear weights (transB) and
 * groupedMatmulWeightGrad, beside one dense matmul of the same rows x n x k.
 */
async function groupedGemm(dtype, shape = { rows: 16384, n: 2048, k: 1024, groups: 8 }) {
  const { rows, n, k, groups } = shape;
  const a = filled(dtype, rows * k), b = filled(dtype, groups * k * n), c = filled(dtype, rows * n), dC = filled(dtype, rows * n), dB = filled(dtype, groups * n * k);
  const offsets = backend.alloc((groups + 1) * 4);
  backend.upload(offsets, Int32Array.from({ length: groups + 1 }, (_, g) => Math.round((g * rows) / groups)));
  const fwd = await time(() => backend.kernels.groupedMatmul({ a, b, offsets, c, rows, n, k, groups, transB: true, dtype }));
  const wgrad = await time(() => backend.kernels.groupedMatmulWeightGrad({ a, dC, offsets, dB, rows, n, k, groups, dtype }));
  const dense = await time(() => backend.kernels.matmul({ a, b, c, m: rows, n, k, transB: true, dtype }));
  [a, b, c, dC, dB, offsets].forEach((x) => backend.free(x));
  const flops = 2 * rows * n * k;
  const peak = caps.peakFlops[dtype];
  return progress({
    dtype,
    ...shape,
    forward_tflops_median: flops / fwd.median / 1e12,
    forward_tflops_pipelined: flops / fwd.pipelined / 1e12,
    weight_grad_tflops_median: flops / wgrad.median / 1e12,
    weight_grad_tflops_pipelined: flops / wgrad.pipelined / 1e12,
    dense_tflops_median: flops / dense.median / 1e12,
    forward_over_dense: dense.median / fwd.median,
    forward_cold_ms: fwd.cold * 1e3,
    weight_grad_cold_ms: wgrad.cold * 1e3,
    forward_fraction_of_peak: peak ? flops / fwd.median / peak : null,
  });
}

async function attention(dtype, shape = { batch: 8, seqLen: 1024, heads: 12, kvHeads: 12, headDim: 64 }, on = backend, path = "default") {
  const rows = shape.batch * shape.seqLen, width = shape.heads * shape.headDim;
  const [q, k, v, out, dOut, dQ, dK, dV] = Array.from({ length: 8 }, () => filled(dtype, rows * width, on));
  const lse = filled("f32", shape.batch * shape.heads * shape.seqLen, on);
  const fwd = await time(() => on.kernels.attentionForward({ q, k, v, out, lse, ...shape, dtype }), on);
  const bwd = await time(() => on.kernels.attentionBackward({ dOut, q, k, v, out, lse, dQ, dK, dV, ...shape, dtype }), on);
  [q, k, v, out, dOut, dQ, dK, dV, lse].forEach((x) => on.free(x));
  // The contract's counts: the pairs the causal mask (or the window) keeps.
  const flops = kernelSpecs.attentionForward.flops({ ...shape, dtype });
  const backwardFlops = kernelSpecs.attentionBackward.flops({ ...shape, dtype });
  return progress({ dtype, path, ...shape, forward_tflops_median: flops / fwd.median / 1e12, backward_tflops_median: backwardFlops / bwd.median / 1e12, forward_tflops_pipelined: flops / fwd.pipelined / 1e12, backward_tflops_pipelined: backwardFlops / bwd.pipelined / 1e12, forward_ms_median: fwd.median * 1e3, backward_ms_median: bwd.median * 1e3, forward_cold_ms: fwd.cold * 1e3, backward_cold_ms: bwd.cold * 1e3 });
}

/** Mamba2's selective scan (ssdScanForward / ssdScanBackward), FLOPs as the contract counts them. */
async function ssdScan(dtype, shape = { batch: 4, seqLen: 1024, heads: 16, headDim: 64, groups: 1, stateSize: 128, chunkSize: 64 }) {
  const rows = shape.batch * shape.seqLen, xw = shape.heads * shape.headDim, bw = shape.groups * shape.stateSize;
  const [x, y, dY, dX] = Array.from({ length: 4 }, () => filled(dtype, rows * xw));
  const [B, C, dB, dC] = Array.from({ length: 4 }, () => filled(dtype, rows * bw));
  const [dt, dDt] = Array.from({ length: 2 }, () => filled(dtype, rows * shape.heads));
  const [dtBias, aLog, D, dDtBias, dALog, dD] = Array.from({ length: 6 }, () => filled(dtype, shape.heads));
  const states = filled("f32", ssdStateElements(shape));
  const fwd = await time(() => backend.kernels.ssdScanForward({ x, dt, dtBias, aLog, B, C, D, y, states, ...shape, dtype }));
  const bwd = await time(() => backend.kernels.ssdScanBackward({ dY, x, dt, dtBias, aLog, B, C, D, states, dX, dDt, dB, dC, dDtBias, dALog, dD, ...shape, dtype }));
  [x, y, dY, dX, B, C, dB, dC, dt, dDt, dtBias, aLog, D, dDtBias, dALog, dD, states].forEach((b) => backend.free(b));
  const flops = kernelSpecs.ssdScanForward.flops(shape);
  return progress({
    dtype,
    ...shape,
    forward_ms_median: fwd.median * 1e3,
    backward_ms_median: bwd.median * 1e3,
    forward_tflops_median: flops / fwd.median / 1e12,
    backward_tflops_median: (2 * flops) / bwd.median / 1e12,
    forward_cold_ms: fwd.cold * 1e3,
    backward_cold_ms: bwd.cold * 1e3,
  });
}

/**
 * The token embedding's backward over one gpt2-small micro-batch (8192 tokens, GPT-2's
 * vocabulary, 768 wide, bf16 into an f32 gradient), its ids drawn `uniform` over the
 * vocabulary or `zipf` as words of text are (id r - 1 with weight 1 / r: the commonest
 * about 720 times, a long run of rows for one id). GB/s over the bytes the call must move:
 * dOut once, each id, the touched rows of the table read and written.
 */
async function embeddingBackward(distribution, shape = { count: 8192, vocab: 50257, dim: 768 }) {
  const { count, vocab, dim } = shape;
  const next = lcg(7);
  const uniform01 = () => next() / 2 ** 32;
  const cdf = new Float64Array(vocab);
  for (let r = 0, total = 0; r < vocab; r++) cdf[r] = total += 1 / (r + 1);
  const draw = () => {
    if (distribution === "uniform") return Math.floor(uniform01() * vocab);
    const u = uniform01() * cdf[vocab - 1];
    let lo = 0, hi = vocab - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const host = Int32Array.from({ length: count }, draw);
  const counts = new Map();
  for (const id of host) counts.set(id, (counts.get(id) ?? 0) + 1);
  const ids = backend.alloc(count * 4);
  backend.upload(ids, host);
  const dOut = filled("bf16", count * dim), dTable = filled("f32", vocab * dim);
  const t = await time(() => backend.kernels.embeddingBackward({ ids, dOut, dTable, count, vocab, dim, dtype: "bf16", gradDtype: "f32" }));
  [ids, dOut, dTable].forEach((b) => backend.free(b));
  const bytes = count * 4 + count * dim * 2 + 2 * counts.size * dim * 4;
  return progress({
    kernel: "embeddingBackward",
    distribution,
    ...shape,
    distinct_ids: counts.size,
    most_rows_of_one_id: Math.max(...counts.values()),
    us_median: t.median * 1e6,
    us_pipelined: t.pipelined * 1e6,
    cold_us: t.cold * 1e6,
    gb_per_s_median: bytes / t.median / 1e9,
  });
}

/** Training steps of a model; `accum` micro-batches per step. GPT-2 models also run through PyTorch. */
async function trainStep(name, dims, batch, seq, dtype, accum = 1) {
  if (!trainWanted(name, dtype)) return undefined;
  const model = resolveModelConfig({ arch: "gpt2", ...dims, maxSeqLen: seq });
  // Armed for three steps after the timed ones: with no device wait, each call's time is what the host spends
  // issuing it (profiled steps issue call by call, with --graphs too).
  const issue = new StepProfiler();
  const trainer = new Trainer(backend, {
    model,
    batchSize: batch,
    seqLen: seq,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "constant", peak: 3e-4, min: 3e-4, warmupSteps: 0, maxSteps: 1 },
    seed: 0,
    dtype,
    profiler: issue,
    ...(values.graphs ? { kernelGraphs: true } : {}),
    ...(lossChunkBytes === undefined ? {} : { lossChunkBytes }),
  });
  const next = lcg(1);
  const rand = () => next() % dims.vocabSize;
  const data = Array.from({ length: accum }, () => ({ ids: Int32Array.from({ length: batch * seq }, rand), targets: Int32Array.from({ length: batch * seq }, rand) }));
  let t = performance.now();
  await trainer.step(data);
  const cold = (performance.now() - t) / 1000;
  progress({ model: name, dtype, cold_step_ms: cold * 1e3 });
  const each = [];
  for (let i = 0; i < STEPS; i++) {
    t = performance.now();
    await trainer.step(data);
    each.push((performance.now() - t) / 1000);
  }
  const sec = median(each);
  progress({ model: name, dtype, ms_per_step_median: sec * 1e3 });
  // The median of three steps' issue times (the first instrumented step runs colder code than the others).
  issue.armed = true;
  for (let i = 0; i < 3; i++) await trainer.step(data);
  issue.armed = false;
  const issueMs = issue.steps.map((st) => st.kernels.reduce((t, k) => t + k.end - k.start, 0));
  const hostIssueMs = median(issueMs);
  const issued = issue.steps[0].kernels;
  // Mean host microseconds per call of each kernel over the three steps, most time first.
  const byKernel = {};
  for (const st of issue.steps) for (const k of st.kernels) (byKernel[k.kernel] ??= []).push(k.end - k.start);
  const hostIssueByKernel = Object.entries(byKernel)
    .map(([kernel, ms]) => [kernel, { calls_per_step: ms.length / issue.steps.length, us_mean: (1e3 * ms.reduce((a, b) => a + b, 0)) / ms.length, us_median: 1e3 * median(ms), us_max: 1e3 * Math.max(...ms) }])
    .sort((a, b) => b[1].us_mean * b[1].calls_per_step - a[1].us_mean * a[1].calls_per_step);
  const tokensPerSecond = (batch * seq * accum) / sec;
  const flops = tokensPerSecond * trainingFlopsPerToken(model, seq);
  const planned = trainer.memoryPlan.total;
  const recompute = trainer.recompute;
  trainer.dispose();
  const peak = caps.peakFlops[dtype];
  // The step's roofline on this card (each kernel call at the longer of its FLOPs at peak and its bytes at the memory bandwidth).
  const bandwidth = gpuProfileForName(caps.device.name)?.memoryBandwidth;
  const calls = trainingStepCosts(model, batch, seq, dtype, recompute, "gpu", lossChunkBytes);
  const rooflineSec = peak && bandwidth ? stepRoofline(calls, accum, peak, bandwidth).seconds : null;
  const torch = model.arch !== "gpt2" || accum !== 1 ? { skipped: "the PyTorch reference is GPT-2 with one micro-batch" } : torchReference("train_step_torch.py", ["--device", "cuda", "--dtype", dtype, "--layers", String(dims.numLayers), "--heads", String(dims.numHeads), "--hidden", String(dims.hiddenSize), "--vocab", String(dims.vocabSize), "--seq", String(seq), "--batch", String(batch), "--steps", String(STEPS)]);
  return progress({
    model: name,
    dtype,
    cuda_graphs: values.graphs === true,
    loss_chunk_mib: lossChunkBytes === undefined ? "default" : lossChunkBytes / 2 ** 20,
    batch,
    seq,
    accum,
    steps_per_s: 1 / sec,
    cold_ms: cold * 1e3,
    ms_per_step_median: sec * 1e3,
    ms_per_step_best: Math.min(...each) * 1e3,
    tokens_per_s: tokensPerSecond,
    mfu: peak ? flops / peak : null,
    roofline_ms: rooflineSec === null ? null : rooflineSec * 1e3,
    roofline_mfu: rooflineSec === null ? null : (batch * seq * accum * trainingFlopsPerToken(model, seq)) / peak / rooflineSec,
    launches_per_step: calls.before.length + accum * calls.microBatch.length + calls.after.length,
    // Host time spent issuing the step's kernel calls (one step, nothing waited for): near ms_per_step_median, the host binds.
    host_issue_ms: hostIssueMs,
    host_issue_ms_each_step: issueMs,
    host_issue_us_per_call: (1e3 * hostIssueMs) / issued.length,
    host_issue_by_kernel: Object.fromEntries(hostIssueByKernel.slice(0, 12)),
    planned_bytes: planned,
    recompute,
    torch,
    step_time_ratio_vs_torch: torch.ms_per_step_median ? sec * 1e3 / torch.ms_per_step_median : null,
  });
}

/** kiln's figure over PyTorch's for each entry, matched by dtype. */
function ratios(ours, theirs, keys) {
  if (!theirs) return undefined;
  return ours.map((o) => {
    const t = theirs.find((x) => x.dtype === o.dtype);
    return { dtype: o.dtype, ...Object.fromEntries(keys.map((k) => [k, t ? o[k] / t[k] : null])) };
  });
}

const gemms = runs("gemm") ? [await gemm("f32"), await gemm("bf16"), await gemm("f16")] : [];
/** A CUDA backend opened with one KILN_* path variable set, and any `more` (the addon reads them at open). */
function backendWithPath(variable, value, more = {}) {
  const env = { [variable]: value, ...more };
  Object.assign(process.env, env);
  try {
    return createCudaBackend({ device: DEVICE });
  } finally {
    for (const k of Object.keys(env)) delete process.env[k];
  }
}

// kiln's own matmul kernels beside cuBLASLt when the default backend uses cuBLASLt:
// "kiln" what KILN_MATMUL_PATH=kiln runs (Hopper's wgmma kernel on sm_90, the mma.sync
// kernel elsewhere), and on sm_90 "kiln-mma" the mma.sync kernel.
let ownGemms = [];
if (runs("gemm") && matmulPath(backend) === "cublaslt") {
  const own = backendWithPath("KILN_MATMUL_PATH", "kiln");
  ownGemms = [await gemm("f32", own, "kiln"), await gemm("bf16", own, "kiln"), await gemm("f16", own, "kiln")];
  own.dispose();
  if (caps.device.computeCapability === "9.0") {
    const mma = backendWithPath("KILN_MATMUL_PATH", "mma");
    ownGemms.push(await gemm("bf16", mma, "kiln-mma"), await gemm("f16", mma, "kiln-mma"));
    mma.dispose();
  }
  // The WMMA kernel that the pipelined ones replaced, for comparison.
  const wmma = backendWithPath("KILN_MATMUL_PATH", "wmma");
  ownGemms.push(await gemm("bf16", wmma, "kiln-wmma"));
  wmma.dispose();
  const tf32 = createCudaBackend({ device: DEVICE, tf32: true });
  ownGemms.push(await gemm("f32", tf32, "cublaslt-tf32"));
  tf32.dispose();
}
const groupedGemms = runs("grouped") ? [await groupedGemm("bf16"), await groupedGemm("f32")] : [];
const attentions = runs("attention") ? [await attention("bf16"), await attention("f32")] : [];
const attentionsWmma = [];
if (runs("attention")) {
  // The WMMA attention kernels that the mma.sync ones replaced, for comparison.
  const wmmaAttention = backendWithPath("KILN_ATTENTION_PATH", "wmma");
  attentionsWmma.push(await attention("bf16", undefined, wmmaAttention, "wmma"));
  wmmaAttention.dispose();
  // The mma.sync kernels (the default off sm_90) beside their earlier settings: the
  // forward's key tiles of 32 (KILN_ATTENTION_MMA_KEYS=32, 64 by default) and the
  // backward's dQ recomputed (KILN_ATTENTION_DQ=recompute, from the stored dS by default).
  const sm90 = caps.device.computeCapability === "9.0";
  for (const [path, more] of [
    ...(sm90 ? [["mma", {}]] : []),
    ["mma-keys-32", { KILN_ATTENTION_MMA_KEYS: "32" }],
    ["mma-recompute", { KILN_ATTENTION_DQ: "recompute" }],
  ]) {
    const b = backendWithPath("KILN_ATTENTION_PATH", "mma", more);
    attentionsWmma.push(await attention("bf16", undefined, b, path));
    b.dispose();
  }
  // On sm_90 the default is Hopper's wgmma kernels (blocks of one warpgroup, 64 rows): f16
  // too, and blocks of two warpgroups sharing each loop tile (KILN_ATTENTION_WGMMA_ROWS=128).
  if (sm90) {
    const wgmmaF16 = await attention("f16", undefined, backend, "wgmma");
    const wgmma128 = backendWithPath("KILN_ATTENTION_WGMMA_ROWS", "128");
    attentionsWmma.push(wgmmaF16, await attention("bf16", undefined, wgmma128, "wgmma-128"));
    wgmma128.dispose();
  }
}
// Sliding-window attention (window 128) beside full causal attention at seq 1024, bf16: the time ratio.
const slidingWindow = runs("attention")
  ? await (async () => {
      const full = attentions[0];
      const win = await attention("bf16", { batch: 8, seqLen: 1024, heads: 12, kvHeads: 12, headDim: 64, window: 128 }, backend, "window-128");
      return { seqLen: 1024, window: 128, dtype: "bf16", window_run: win, forward_full_over_window: full.forward_ms_median / win.forward_ms_median, backward_full_over_window: full.backward_ms_median / win.backward_ms_median };
    })()
  : undefined;
const ssdScans = runs("ssd") ? [await ssdScan("bf16"), await ssdScan("f32")] : [];
const embeddings = runs("embedding") ? [await embeddingBackward("uniform"), await embeddingBackward("zipf")] : [];
const torchKernels = runs("gemm") || runs("attention") ? torchReference("cuda_kernels_torch.py", ["--calls", String(CALLS)]) : undefined;
const report = {
  gpu: true,
  device: caps.device.name,
  compute_capability: caps.device.computeCapability,
  peak_flops: caps.peakFlops,
  libraries: caps.device.libraries ?? "none: kiln's own kernels run every matmul",
  gemm: [...gemms, ...ownGemms],
  own_gemm_ratio_vs_cublaslt: ownGemms.length ? ownGemms.slice(0, 3).map((o, i) => ({ dtype: o.dtype, tflops_median: o.tflops_median / gemms[i].tflops_median, tflops_pipelined: o.tflops_pipelined / gemms[i].tflops_pipelined })) : undefined,
  grouped_gemm: groupedGemms,
  attention: [...attentions, ...attentionsWmma],
  sliding_window_attention: slidingWindow,
  ssd_scan: ssdScans,
  embedding_backward: embeddings,
  torch_kernels: torchKernels,
  gemm_ratio_vs_torch: ratios(gemms, torchKernels?.gemm, ["tflops_median", "tflops_pipelined"]),
  own_gemm_ratio_vs_torch: ownGemms.length ? ratios(ownGemms.slice(0, 3), torchKernels?.gemm, ["tflops_median", "tflops_pipelined"]) : undefined,
  attention_ratio_vs_torch: ratios(attentions, torchKernels?.attention, ["forward_tflops_median", "backward_tflops_median", "forward_tflops_pipelined", "backward_tflops_pipelined"]),
  attention_mma_ratio_vs_torch: ratios(
    attentionsWmma.filter((a) => a.path === "mma"),
    torchKernels?.attention,
    ["forward_tflops_median", "backward_tflops_median", "forward_tflops_pipelined", "backward_tflops_pipelined"],
  ),
  // MFU against the dtype's peak: f32 against the non-tensor-core f32 peak, bf16 against the dense bf16 tensor peak.
  train: !runs("train")
    ? []
    : [
        await trainStep("bench-small", { vocabSize: 8192, hiddenSize: 384, numLayers: 6, numHeads: 6 }, 8, 256, "f32"),
        await trainStep("bench-small", { vocabSize: 8192, hiddenSize: 384, numLayers: 6, numHeads: 6 }, 8, 256, "bf16"),
        await trainStep("gpt2-small", { vocabSize: 50257, hiddenSize: 768, numLayers: 12, numHeads: 12 }, 8, 1024, "f32"),
        await trainStep("gpt2-small", { vocabSize: 50257, hiddenSize: 768, numLayers: 12, numHeads: 12 }, 8, 1024, "bf16"),
        // models/gpt2-small.yaml as configured: 8 x 1024 tokens x 8 micro-batches a step (the optimizer's calls once per 8).
        await trainStep("gpt2-small-accum8", { vocabSize: 50257, hiddenSize: 768, numLayers: 12, numHeads: 12 }, 8, 1024, "bf16", 8),
        // models/nano.yaml: Llama, 8 x 256 tokens x 4 micro-batches per step.
        ...(await (async () => {
          const nano = { arch: "llama", vocabSize: 50257, hiddenSize: 512, numLayers: 10, numHeads: 8, kvHeads: 4, intermediateSize: 1536 };
          return [await trainStep("nano", nano, 8, 256, "f32", 4), await trainStep("nano", nano, 8, 256, "bf16", 4)];
        })()),
      ].filter(Boolean),
};
console.log(JSON.stringify(report, null, 1));
backend.dispose();
process.exit(0);
