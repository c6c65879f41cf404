// TensorFlow.js wasm backend (XNNPACK) matMul, for comparison with @kiln/kernels-wasm.
// Its threaded build needs emscripten pthreads in a browser; in Node it runs on
// one thread (WASM_HAS_MULTITHREAD_SUPPORT is false there), so it is timed on one.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);

/** GFLOP/s of tf.matMul on size x size f32 matrices, or { skipped } when tfjs is not installed. */
export async function benchTfjsMatmul(size, repeats) {
  let tf;
  let wasm;
  try {
    tf = require("@tensorflow/tfjs-core");
    wasm = require("@tensorflow/tfjs-backend-wasm");
  } catch {
    return { skipped: "@tensorflow/tfjs-backend-wasm is not installed: pnpm --dir tooling/bench install --ignore-workspace" };
  }
  const dir = path.dirname(require.resolve("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm"));
  wasm.setWasmPaths(`${dir}/`);
  if (!(await tf.setBackend("wasm"))) return { skipped: "tfjs could not start its wasm backend" };
  await tf.ready();

  // Warm up with many short calls, like our own kernels.
  const sa = tf.randomUniform([64, 64]);
  const sb = tf.randomUniform([64, 64]);
  for (let i = 0; i < 500; i++) tf.tidy(() => tf.matMul(sa, sb).dataSync());
  tf.dispose([sa, sb]);

  const a = tf.randomUniform([size, size], -0.5, 0.5);
  const b = tf.randomUniform([size, size], -0.5, 0.5);
  tf.tidy(() => tf.matMul(a, b).dataSync());
  const seconds = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    const c = tf.matMul(a, b);
    c.dataSync();
    seconds.push((performance.now() - t0) / 1000);
    c.dispose();
  }
  tf.dispose([a, b]);
  const best = Math.min(...seconds);
  return {
    version: tf.version_core,
    threads: wasm.getThreadsCount(),
    simd: await tf.env().getAsync("WASM_HAS_SIMD_SUPPORT"),
    seconds: Number(best.toFixed(5)),
    gflops: Number(((2 * size ** 3) / best / 1e9).toFixed(1)),
    note: "includes reading C back with dataSync()",
  };
}
