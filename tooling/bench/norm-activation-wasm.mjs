#!/usr/bin/env node
// LayerNorm and GELU, forward and backward, on @kiln/kernels-wasm at transformer
// training sizes; prints one JSON object.
//
//   node tooling/bench/norm-activation-wasm.mjs [--rows 2048] [--dims 384,1536] [--dtypes f32,bf16,f16]
//                                               [--repeats 25] [--threads 1,2]
//
// Needs the package built: pnpm --filter "@kiln/kernels-wasm..." build
// Figures per dim, dtype and thread count: best-of-repeats milliseconds (the best run is the
// one least disturbed by other processes on the cores) and GB/s of
// the memory each call must move (rows x dim elements of `dtype` per operand):
//   layerNormForward   reads x, writes out (+ f32 mean, rstd)          2 operands
//   layerNormBackward  reads dOut and x, writes dX (+ mean, rstd)      3 operands
//                      (dWeight, dBias accumulate; bias present)
//   geluForward        reads x, writes out                            2 operands
//   geluBackward       reads x and dOut, writes dX                    3 operands
// Each kernel is warmed up with many short calls first (V8 optimises a wasm
// function only after it has run a while; a running call never switches).
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { loadKernelsWasm } from "./load-kernels-wasm.mjs";

const round = (x, digits = 2) => Number(x.toFixed(digits));
const BYTES = { f32: 4, bf16: 2, f16: 2 };

/** f32 bits -> f16 bits, mantissa truncated, |x| < 2^-14 to zero (values in [-8, 8] only). */
const f16BitsByTruncation = (b) => {
  const exp = ((b >>> 23) & 0xff) - 112;
  return ((b >>> 16) & 0x8000) | (exp > 0 ? (exp << 10) | ((b >>> 13) & 0x3ff) : 0);
};

/** Uniform values in [lo, hi) stored as `dtype` (bf16 / f16 bits of small values: bench data, not a conversion). */
function upload(backend, n, dtype, lo, hi, seed) {
  const values = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    values[i] = lo + ((hi - lo) * s) / 2 ** 32;
  }
  const buffer = backend.alloc(n * BYTES[dtype]);
  if (dtype === "f32") {
    backend.upload(buffer, values);
  } else {
    const u32 = new Uint32Array(values.buffer);
    backend.upload(buffer, Uint16Array.from(u32, (b) => (dtype === "bf16" ? b >>> 16 : f16BitsByTruncation(b))));
  }
  return buffer;
}

function best(fn, repeats) {
  let min = Infinity;
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    fn();
    min = Math.min(min, performance.now() - t0);
  }
  return min / 1000;
}

/** The four calls on rows x dim operands of `dtype`. */
function makeCalls(backend, rows, dim, dtype) {
  const n = rows * dim;
  const b = {
    x: upload(backend, n, dtype, -3, 3, 1),
    dOut: upload(backend, n, dtype, -1, 1, 2),
    out: upload(backend, n, dtype, 0, 0, 3),
    dX: upload(backend, n, dtype, 0, 0, 4),
    weight: upload(backend, dim, dtype, 0.5, 1.5, 5),
    bias: upload(backend, dim, dtype, -0.1, 0.1, 6),
    dWeight: upload(backend, dim, dtype, 0, 0, 7),
    dBias: upload(backend, dim, dtype, 0, 0, 8),
    mean: backend.alloc(rows * 4),
    rstd: backend.alloc(rows * 4),
  };
  const k = backend.kernels;
  const calls = {
    layerNormForward: () => k.layerNormForward({ x: b.x, weight: b.weight, bias: b.bias, out: b.out, mean: b.mean, rstd: b.rstd, rows, dim, eps: 1e-5, dtype }),
    layerNormBackward: () =>
      k.layerNormBackward({ dOut: b.dOut, x: b.x, weight: b.weight, mean: b.mean, rstd: b.rstd, dX: b.dX, dWeight: b.dWeight, dBias: b.dBias, rows, dim, dtype }),
    geluForward: () => k.geluForward({ x: b.x, out: b.out, n, dtype }),
    geluBackward: () => k.geluBackward({ x: b.x, dOut: b.dOut, dX: b.dX, n, dtype }),
  };
  calls.layerNormForward(); // mean and rstd for the backward
  return { calls, free: () => Object.values(b).forEach((buf) => backend.free(buf)) };
}

/** Operands of rows x dim elements each call moves (the small f32 statistics are added separately). */
const OPERANDS = { layerNormForward: 2, layerNormBackward: 3, geluForward: 2, geluBackward: 3 };
const STAT_BYTES_PER_ROW = { layerNormForward: 8, layerNormBackward: 8, geluForward: 0, geluBackward: 0 };

/**
 * ms and GB/s of each kernel per dim, dtype and thread count.
 * `createWasmBackend` is @kiln/kernels-wasm's export (passed in so tests can use the sources).
 */
export async function benchNormActivation(createWasmBackend, options = {}) {
  const rows = options.rows ?? 2048;
  const dims = options.dims ?? [384, 1536];
  const dtypes = options.dtypes ?? ["f32", "bf16", "f16"];
  const repeats = options.repeats ?? 25;
  const results = {};
  for (const threads of options.threads ?? [1, 2]) {
    const backend = await createWasmBackend({ threads, measurePeak: false });
    const perThreads = {};
    try {
      for (const dtype of dtypes) {
        // Calls big enough to spend V8's tier-up budget quickly, small enough to make many.
        const small = makeCalls(backend, 64, 256, dtype);
        const deadline = performance.now() + (options.warmUpMs ?? 1000);
        while (performance.now() < deadline) for (const call of Object.values(small.calls)) call();
        small.free();
        for (const dim of dims) {
          const { calls, free } = makeCalls(backend, rows, dim, dtype);
          const figures = {};
          for (const [name, call] of Object.entries(calls)) {
            call();
            const seconds = best(call, repeats);
            const bytes = OPERANDS[name] * rows * dim * BYTES[dtype] + STAT_BYTES_PER_ROW[name] * rows;
            figures[name] = { ms: round(seconds * 1000, 3), gbPerSecond: round(bytes / seconds / 1e9, 1) };
          }
          free();
          perThreads[`${dtype} dim=${dim}`] = figures;
        }
      }
      perThreads.simd = backend.capabilities().device.simd;
    } finally {
      backend.dispose();
    }
    results[`${threads}thread${threads > 1 ? "s" : ""}`] = perThreads;
  }
  return { rows, dims, dtypes, results };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      rows: { type: "string", default: "2048" },
      dims: { type: "string", default: "384,1536" },
      dtypes: { type: "string", default: "f32,bf16,f16" },
      repeats: { type: "string", default: "25" },
      threads: { type: "string", default: "1,2" },
    },
  });
  const { createWasmBackend } = await loadKernelsWasm();
  const result = await benchNormActivation(createWasmBackend, {
    rows: Number(values.rows),
    dims: values.dims.split(",").map(Number),
    dtypes: values.dtypes.split(","),
    repeats: Number(values.repeats),
    threads: values.threads.split(",").map(Number),
  });
  console.log(JSON.stringify({ bench: "norm-activation-wasm", date: new Date().toISOString(), ...result }, null, 2));
}
