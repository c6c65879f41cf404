// GEMM GFLOP/s at every matmul shape of one bench-small training step (GPT-2: 6 layers,
// hidden 384, vocab 8192, batch 8 x seq 256 = 2048 rows), forward and backward, for
// @kiln/kernels-wasm on all threads and TensorFlow.js's wasm matMul (one thread in Node)
// on the same shapes in the same run, with the ratio.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const R = 2048, C = 384, F = 4 * C, V = 8192;

/** name, m, n, k, transA, transB: the products of a GPT-2 block and the tied lm_head. */
export const TRAINING_MATMULS = [
  ["fwd c_attn", R, 3 * C, C, false, false],
  ["fwd attn c_proj", R, C, C, false, false],
  ["fwd mlp c_fc", R, F, C, false, false],
  ["fwd mlp c_proj", R, C, F, false, false],
  ["fwd lm_head", R, V, C, false, true],
  ["bwd dX c_attn", R, C, 3 * C, false, true],
  ["bwd dX attn c_proj", R, C, C, false, true],
  ["bwd dX mlp c_fc", R, C, F, false, true],
  ["bwd dX mlp c_proj", R, F, C, false, true],
  ["bwd dX lm_head", R, C, V, false, false],
  ["bwd dW c_attn", C, 3 * C, R, true, false],
  ["bwd dW attn c_proj", C, C, R, true, false],
  ["bwd dW mlp c_fc", C, F, R, true, false],
  ["bwd dW mlp c_proj", F, C, R, true, false],
  ["bwd dW lm_head", V, C, R, true, false],
].map(([name, m, n, k, transA, transB]) => ({ name, m, n, k, transA, transB }));

const best = (f, repeats) => {
  let s = Infinity;
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    f();
    s = Math.min(s, (performance.now() - t0) / 1000);
  }
  return s;
};

async function tfjsBackend() {
  try {
    const tf = require("@tensorflow/tfjs-core");
    const wasm = require("@tensorflow/tfjs-backend-wasm");
    wasm.setWasmPaths(`${path.dirname(require.resolve("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm"))}/`);
    if (!(await tf.setBackend("wasm"))) return undefined;
    await tf.ready();
    return tf;
  } catch {
    return undefined;
  }
}

export async function benchTrainingMatmuls(createKernels, { threads, repeats = 5 }) {
  // kiln first, then TensorFlow.js once kiln's worker threads are gone, so neither
  // competes with the other's threads for the cores.
  const kernels = await createKernels({ threads });
  const rows = [];
  try {
    for (const s of TRAINING_MATMULS) {
      const A = kernels.alloc(s.m * s.k), B = kernels.alloc(s.k * s.n), Cb = kernels.alloc(s.m * s.n);
      A.array.fill(0.01);
      B.array.fill(0.02);
      const opts = { m: s.m, n: s.n, k: s.k, transA: s.transA, transB: s.transB };
      for (let i = 0; i < 3; i++) kernels.matmulInto({ a: A, b: B, c: Cb }, opts);
      const seconds = best(() => kernels.matmulInto({ a: A, b: B, c: Cb }, opts), repeats);
      A.free(); B.free(); Cb.free();
      rows.push({ ...s, kilnGflops: Number(((2 * s.m * s.n * s.k) / seconds / 1e9).toFixed(1)) });
    }
  } finally {
    await kernels.dispose();
  }
  const tf = await tfjsBackend();
  if (tf) {
    for (const row of rows) {
      const a = tf.randomUniform(row.transA ? [row.k, row.m] : [row.m, row.k]);
      const b = tf.randomUniform(row.transB ? [row.n, row.k] : [row.k, row.n]);
      const run = () => {
        const c = tf.matMul(a, b, row.transA, row.transB);
        c.dataSync();
        c.dispose();
      };
      run();
      const seconds = best(run, repeats);
      tf.dispose([a, b]);
      row.tfjsGflops = Number(((2 * row.m * row.n * row.k) / seconds / 1e9).toFixed(1));
      row.ratio = Number((row.kilnGflops / row.tfjsGflops).toFixed(2));
    }
  }
  const stepGflops = (key) => rows.reduce((acc, r) => acc + 2 * r.m * r.n * r.k, 0) / rows.reduce((acc, r) => acc + (2 * r.m * r.n * r.k) / (r[key] * 1e9), 0) / 1e9;
  return {
    threads,
    tfjs: tf ? { version: tf.version_core, threads: 1, note: "tfjs-backend-wasm runs one thread in Node; its time includes dataSync()" } : { skipped: "@tensorflow/tfjs-backend-wasm is not installed" },
    shapes: rows,
    stepGflops: { kiln: Number(stepGflops("kilnGflops").toFixed(1)), ...(tf ? { tfjs: Number(stepGflops("tfjsGflops").toFixed(1)) } : {}) },
  };
}
