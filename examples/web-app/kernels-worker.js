// Two threads when the page is cross-origin isolated (COOP/COEP headers), one otherwise.
import { createKernels } from "@kiln/kernels-wasm";

async function multiply() {
  const kernels = await createKernels({ threads: 2 });
  const c = kernels.matmul(new Float32Array([1, 2, 3, 4, 5, 6]), new Float32Array([1, 0, 0, 1, 1, 1]), { m: 2, n: 2, k: 3 });
  const { simd, threads, threadLimitReason } = kernels.info;
  await kernels.dispose();
  return { c: Array.from(c), simd, threads, threadLimitReason };
}

multiply().then(
  (result) => postMessage({ result }),
  // kiln's errors carry what to do in `hint`.
  (error) => postMessage({ error: `${error}${error?.hint ? `\n  what to do: ${error.hint}` : ""}` }),
);
