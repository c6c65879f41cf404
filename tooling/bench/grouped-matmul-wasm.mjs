#!/usr/bin/env node
// groupedMatmul and groupedMatmulWeightGrad on @kiln/kernels-wasm next to one plain
// matmul of the same total size; prints one JSON object.
//
//   node tooling/bench/grouped-matmul-wasm.mjs [--rows 2048] [--n 512] [--k 512] [--groups 8]
//                                              [--dtypes f32,bf16] [--repeats 9] [--threads 1,2]
//
// Needs the package built: pnpm --filter "@kiln/kernels-wasm..." build
// The experts' matmuls of a mixture-of-experts layer: `rows` slot-ordered tokens split
// into `groups` experts, B_g stored (n, k) like a torch Linear weight (transB).
//   forward      groupedMatmul vs matmul (rows x n x k, transB)
//   weightGrad   groupedMatmulWeightGrad vs matmul (n x k x rows, transA, accumulate)
// Group sizes: "even" (rows / groups each) and "uneven" (fixed pseudo-random cut points,
// one group empty). GFLOP/s = 2 * rows * n * k / seconds; median and best of `repeats`
// calls after a warm-up (V8 optimises a wasm function only after many calls).
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { loadKernelsWasm } from "./load-kernels-wasm.mjs";

const round = (x, digits = 2) => Number(x.toFixed(digits));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const BYTES = { f32: 4, bf16: 2, f16: 2 };

function fill(backend, buffer, n, dtype, seed) {
  const values = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (s * 1664525 + 1013904223) >>> 0;
    values[i] = s / 2 ** 32 - 0.5;
  }
  if (dtype === "f32") return backend.upload(buffer, values);
  // bf16 bits by truncation, f16 bits of small values: bench data, not a conversion.
  const bits = new Uint16Array(n);
  const u32 = new Uint32Array(values.buffer);
  for (let i = 0; i < n; i++) bits[i] = dtype === "bf16" ? u32[i] >>> 16 : ((u32[i] >>> 16) & 0x8000) | 0x3800 | ((u32[i] >>> 13) & 0x3ff);
  backend.upload(buffer, bits);
}

/** Group boundaries: equal groups, or fixed uneven cut points with group 1 empty. */
function offsetsFor(rows, groups, kind) {
  const o = Array.from({ length: groups + 1 }, (_, g) => Math.round((g * rows) / groups));
  if (kind === "uneven") {
    const weights = Array.from({ length: groups }, (_, g) => (g === 1 ? 0 : 1 + ((g * 7) % 5)));
    const total = weights.reduce((x, y) => x + y, 0);
    let acc = 0;
    for (let g = 0; g < groups; g++) {
      acc += weights[g];
      o[g + 1] = Math.round((acc * rows) / total);
    }
  }
  return Int32Array.from(o);
}

function timeCalls(fn, repeats) {
  const seconds = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    fn();
    seconds.push((performance.now() - t0) / 1000);
  }
  return { median: median(seconds), best: Math.min(...seconds) };
}

const figure = (flops, t) => ({ medianGflops: round(flops / t.median / 1e9, 1), bestGflops: round(flops / t.best / 1e9, 1), medianSeconds: round(t.median, 5) });

/**
 * GFLOP/s of the grouped kernels and of the equivalent plain matmuls, per dtype and thread count.
 * `createWasmBackend` is @kiln/kernels-wasm's export (passed in so tests can use the sources).
 */
export async function benchGroupedMatmul(createWasmBackend, options = {}) {
  const dims = { rows: options.rows ?? 2048, n: options.n ?? 512, k: options.k ?? 512, groups: options.groups ?? 8 };
  const { rows, n, k, groups } = dims;
  const repeats = options.repeats ?? 9;
  const flops = 2 * rows * n * k;
  const results = {};
  for (const threads of options.threads ?? [1, 2]) {
    const backend = await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false });
    try {
      const perThreads = {};
      for (const dtype of options.dtypes ?? ["f32", "bf16"]) {
        const buf = (elements, seed) => {
          const b = backend.alloc(elements * BYTES[dtype]);
          fill(backend, b, elements, dtype, seed);
          return b;
        };
        const a = buf(rows * k, 1), b = buf(groups * n * k, 2), c = buf(rows * n, 3), dB = buf(groups * n * k, 4), dBPlain = buf(n * k, 5);
        const offsets = { even: backend.alloc(4 * (groups + 1)), uneven: backend.alloc(4 * (groups + 1)) };
        for (const kind of ["even", "uneven"]) backend.upload(offsets[kind], offsetsFor(rows, groups, kind));
        const calls = {
          matmul: () => backend.kernels.matmul({ a, b, c, m: rows, n, k, transB: true, dtype }),
          matmulWeightGrad: () => backend.kernels.matmul({ a: c, b: a, c: dBPlain, m: n, n: k, k: rows, transA: true, accumulate: true, dtype }),
        };
        for (const kind of ["even", "uneven"]) {
          calls[`grouped ${kind}`] = () => backend.kernels.groupedMatmul({ a, b, c, offsets: offsets[kind], ...dims, transB: true, dtype });
          calls[`groupedWeightGrad ${kind}`] = () => backend.kernels.groupedMatmulWeightGrad({ a, dC: c, dB, offsets: offsets[kind], ...dims, dtype });
        }
        const deadline = performance.now() + (options.warmUpMs ?? 2000);
        while (performance.now() < deadline) for (const call of Object.values(calls)) call();
        const out = {};
        for (const [name, call] of Object.entries(calls)) out[name] = figure(flops, timeCalls(call, repeats));
        perThreads[dtype] = out;
        for (const x of [a, b, c, dB, dBPlain, offsets.even, offsets.uneven]) backend.free(x);
      }
      results[`${threads}thread${threads > 1 ? "s" : ""}`] = { ...perThreads, simd: backend.capabilities().device.simd };
    } finally {
      backend.dispose();
    }
  }
  return { dims, repeats, results };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      rows: { type: "string", default: "2048" },
      n: { type: "string", default: "512" },
      k: { type: "string", default: "512" },
      groups: { type: "string", default: "8" },
      dtypes: { type: "string", default: "f32,bf16" },
      repeats: { type: "string", default: "9" },
      threads: { type: "string", default: "1,2" },
    },
  });
  const { createWasmBackend } = await loadKernelsWasm();
  const result = await benchGroupedMatmul(createWasmBackend, {
    rows: Number(values.rows),
    n: Number(values.n),
    k: Number(values.k),
    groups: Number(values.groups),
    dtypes: values.dtypes.split(","),
    repeats: Number(values.repeats),
    threads: values.threads.split(",").map(Number),
  });
  console.log(JSON.stringify({ bench: "grouped-matmul-wasm", date: new Date().toISOString(), ...result }, null, 2));
}
