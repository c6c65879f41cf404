// @kiln/kernels-wasm in a plain Node script: a 2x3 by 3x2 matmul on every core.
import { createKernels } from "@kiln/kernels-wasm";

const kernels = await createKernels();
const a = new Float32Array([1, 2, 3, 4, 5, 6]); // 2 x 3
const b = new Float32Array([1, 0, 0, 1, 1, 1]); // 3 x 2
const c = kernels.matmul(a, b, { m: 2, n: 2, k: 3 });
console.log(JSON.stringify({ c: Array.from(c), simd: kernels.info.simd, threads: kernels.info.threads }));
await kernels.dispose();
