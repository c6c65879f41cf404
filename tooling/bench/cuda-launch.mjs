// What one kernel call costs the host on the CUDA backend: for a few small calls of
// the kinds a training step makes, the host time per call of --calls calls issued back
// to back with no wait (what the trainer pays to issue them), then the time per call
// once the device has run them all. "native fill" calls the addon's launch directly
// with its prepared values (no contract checks, no operand resolution): the floor
// under every call; the gap to "fill" is the JavaScript side of a call, and "fill
// (prepared)" is the call as a compiled training step issues it (Backend.prepare).
// Prints one JSON object. On a machine without a usable GPU it says so and exits 0;
// --sim runs the same on the CUDA simulator (there kernels run as they are issued).
// Usage: node tooling/bench/cuda-launch.mjs [--calls 500] [--sim]
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { encodeToBytes } from "../../packages/contract/dist/index.js";
import { createCudaBackend, createCudaSimBackend, cudaStatus } from "../../packages/kernels-cuda/dist/index.js";

const { values } = parseArgs({ options: { calls: { type: "string" }, sim: { type: "boolean" } } });
const CALLS = Number(values.calls ?? (values.sim ? 50 : 500));
const status = cudaStatus();
if (values.sim ? !status.simulator.built : !status.addon.built || status.runtime.deviceCount === 0) {
  console.log(JSON.stringify({ gpu: false, reason: values.sim ? status.simulator.detail : status.addon.built ? status.runtime.error || status.driver.detail : status.addon.detail }));
  process.exit(0);
}
const open = () => (values.sim ? createCudaSimBackend() : createCudaBackend({ device: 0 }));
const BYTES = { f32: 4, bf16: 2, f16: 2, i32: 4 };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A buffer of `elements` values in [0, 1) (integers below `max` for i32). */
function buffer(on, dtype, elements, max = 0) {
  const buf = on.alloc(elements * BYTES[dtype]);
  const data = dtype === "i32" ? Int32Array.from({ length: elements }, (_, i) => (i * 7919) % max) : encodeToBytes(Float32Array.from({ length: elements }, (_, i) => ((i * 0.618) % 1) - 0.5), dtype);
  on.upload(buf, data);
  return buf;
}

/** Host microseconds per call issued back to back, and wall microseconds per call to the device's end (median of 5 rounds). */
async function perCall(on, call) {
  for (let i = 0; i < 20; i++) call();
  await on.synchronize();
  const host = [], wall = [];
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < CALLS; i++) call();
    const t1 = performance.now();
    await on.synchronize();
    const t2 = performance.now();
    host.push(((t1 - t0) * 1e3) / CALLS);
    wall.push(((t2 - t0) * 1e3) / CALLS);
  }
  return { host_us: median(host), wall_us: median(wall), host_us_best: Math.min(...host) };
}

/** The calls timed on `on`: small shapes, so the host's share shows. */
function calls(on) {
  const f = (dtype, n) => buffer(on, dtype, n);
  const x = f("f32", 4096), y = f("f32", 4096), z = f("f32", 4096);
  const xb = f("bf16", 8 * 384), wb = f("bf16", 384), bb = f("bf16", 384), ob = f("bf16", 8 * 384), mean = f("f32", 8), rstd = f("f32", 8);
  const a64 = f("bf16", 64 * 64), b64 = f("bf16", 64 * 64), c64 = f("bf16", 64 * 64), c64f = f("f32", 64 * 64);
  const af = f("f32", 64 * 64), bf = f("f32", 64 * 64), cf = f("f32", 64 * 64);
  const logits = f("bf16", 8 * 512), targets = buffer(on, "i32", 8, 512), losses = f("f32", 8), lse = f("f32", 8);
  const p = f("bf16", 4096), g = f("f32", 4096), m = f("f32", 4096), v = f("f32", 4096), master = f("f32", 4096);
  const att = { batch: 1, seqLen: 64, heads: 2, kvHeads: 2, headDim: 64, dtype: "bf16" };
  const [q, k, vv, out] = Array.from({ length: 4 }, () => f("bf16", 64 * 128));
  const alse = f("f32", 2 * 64);
  return {
    fill: () => on.kernels.fill({ out: x, n: 256, value: 0.5, dtype: "f32" }),
    add: () => on.kernels.add({ a: x, b: y, out: z, n: 4096, dtype: "f32" }),
    layerNormForward: () => on.kernels.layerNormForward({ x: xb, weight: wb, bias: bb, out: ob, mean, rstd, rows: 8, dim: 384, eps: 1e-5, dtype: "bf16" }),
    "matmul f32 64^3": () => on.kernels.matmul({ a: af, b: bf, c: cf, m: 64, n: 64, k: 64, dtype: "f32" }),
    "matmul bf16 64^3": () => on.kernels.matmul({ a: a64, b: b64, c: c64, m: 64, n: 64, k: 64, dtype: "bf16" }),
    "matmul bf16 64^3 transB accumulate f32": () => on.kernels.matmul({ a: a64, b: b64, c: c64f, m: 64, n: 64, k: 64, transB: true, accumulate: true, cDtype: "f32", dtype: "bf16" }),
    attentionForward: () => on.kernels.attentionForward({ q, k, v: vv, out, lse: alse, ...att }),
    crossEntropyForward: () => on.kernels.crossEntropyForward({ logits, targets, losses, lse, rows: 8, vocab: 512, dtype: "bf16" }),
    adamW: () => on.kernels.adamW({ param: p, grad: g, m, v, master, n: 4096, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 1, dtype: "bf16" }),
  };
}

const backend = open();
const results = {};
// The floor: the addon's launch with prepared values, beside the same fill through the backend.
// The addon the backend loaded (KILN_CUDA_ADDON / KILN_CUDA_SIM_ADDON, else the package's build).
const addonFile = values.sim
  ? process.env.KILN_CUDA_SIM_ADDON || fileURLToPath(new URL("../../packages/kernels-cuda/build-sim/Release/kiln_cuda_sim.node", import.meta.url))
  : process.env.KILN_CUDA_ADDON || fileURLToPath(new URL("../../packages/kernels-cuda/build/Release/kiln_cuda.node", import.meta.url));
const raw = new (createRequire(import.meta.url)(addonFile).Device)(0);
const rawOut = raw.alloc(1024);
const rawValues = Float64Array.of(rawOut, 256, 0.5, 0);
results["native fill"] = await perCall(raw, () => raw.launch("fill", rawValues));
raw.free(rawOut);
raw.close();
for (const [name, call] of Object.entries(calls(backend))) results[name] = await perCall(backend, call);
// Prepared calls (Backend.prepare: checked and resolved once), as a compiled training step issues them.
{
  const out = backend.alloc(1024);
  results["fill (prepared)"] = await perCall(backend, backend.prepare("fill", { out, n: 256, value: 0.5, dtype: "f32" }));
  backend.free(out);
}
// The same matmuls on kiln's own kernels (KILN_MATMUL_PATH=kiln) where cuBLASLt took them above.
if (!values.sim) {
  process.env.KILN_MATMUL_PATH = "kiln";
  const own = open();
  delete process.env.KILN_MATMUL_PATH;
  const ownCalls = calls(own);
  for (const name of ["matmul f32 64^3", "matmul bf16 64^3", "matmul bf16 64^3 transB accumulate f32"]) results[`${name} (kiln)`] = await perCall(own, ownCalls[name]);
  own.dispose();
}
console.log(JSON.stringify({ device: backend.capabilities().device.name, libraries: backend.capabilities().device.libraries ?? "none", calls: CALLS, per_call: results }, null, 1));
backend.dispose();
process.exit(0);
