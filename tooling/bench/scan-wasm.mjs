// The state space scans on the wasm backend: Mamba2's ssdScan and Mamba3's mamba3Scan (without
// and with the rotation), forward and backward, at one Mamba2-sized shape (batch 4, seqLen 256,
// 8 heads of 64, 1 group, stateSize 64, chunkSize 64) on 1 and all threads, f32 and bf16:
// best-of-repeats ms and GFLOP/s by the contract's counts. Part of kernels-wasm.mjs.
import { kernelSpecs } from "../../packages/contract/dist/index.js";

const DIMS = { batch: 4, seqLen: 256, heads: 8, headDim: 64, groups: 1, stateSize: 64, chunkSize: 64 };

/** Each scan: its forward and backward kernels, and the optional operands it passes. */
export const SCANS = {
  ssdScan: { forward: "ssdScanForward", backward: "ssdScanBackward", present: [] },
  mamba3Scan: { forward: "mamba3ScanForward", backward: "mamba3ScanBackward", present: [] },
  mamba3ScanRotation: { forward: "mamba3ScanForward", backward: "mamba3ScanBackward", present: ["theta", "dTheta"] },
};

/** Every operand of `kernel` the call passes, sized by its spec; inputs smooth, dt near -2 (Δ ≈ 0.13). */
function operandsOf(backend, kernel, args, present, dtype, bufs) {
  for (const o of kernelSpecs[kernel].operands(args)) {
    if ((o.optional && !present.includes(o.key)) || bufs[o.key]) continue;
    const bytes = o.dtype === "f32" ? 4 : 2;
    bufs[o.key] = backend.alloc(o.elements * bytes);
    const values = Float32Array.from({ length: o.elements }, (_, i) => (o.key === "dt" ? -2 : 0) + 0.5 * Math.sin(i * 0.7 + o.key.length));
    if (bytes === 4) backend.upload(bufs[o.key], values);
    else backend.upload(bufs[o.key], Uint16Array.from(new Uint32Array(values.buffer), (u) => u >>> 16)); // bf16 by truncation: bench data
  }
}

/** { shape, f32: { "1thread": { forward: { ms, gflops }, backward }, ... }, bf16 } for one scan. */
export async function benchScan(createBackend, threadCounts, name, timeBest) {
  const scan = SCANS[name];
  const out = { shape: DIMS, ...(scan.present.length ? { with: scan.present[0] } : {}) };
  for (const dtype of ["f32", "bf16"]) {
    out[dtype] = {};
    for (const nthreads of threadCounts) {
      const backend = await createBackend({ threads: nthreads, measurePeak: false });
      try {
        const bufs = {};
        const args = (kernel) => {
          operandsOf(backend, kernel, { ...DIMS, dtype }, scan.present, dtype, bufs);
          const keys = kernelSpecs[kernel].operands({ ...DIMS, dtype }).filter((o) => !o.optional || scan.present.includes(o.key)).map((o) => o.key);
          return { ...DIMS, dtype, ...Object.fromEntries(keys.map((k) => [k, bufs[k]])) };
        };
        const fwd = args(scan.forward), bwd = args(scan.backward);
        const flops = kernelSpecs[scan.forward].flops(fwd);
        const row = {};
        for (const [part, fn, f] of [["forward", () => backend.kernels[scan.forward](fwd), flops], ["backward", () => backend.kernels[scan.backward](bwd), 2 * flops]]) {
          for (let i = 0; i < 20; i++) fn(); // tier-up: V8 optimises each wasm function after enough calls
          const seconds = timeBest(fn).best;
          row[part] = { ms: Math.round(seconds * 1e5) / 100, gflops: Math.round((f / seconds / 1e9) * 100) / 100 };
        }
        out[dtype][`${nthreads}thread${nthreads > 1 ? "s" : ""}`] = row;
      } finally {
        await backend.dispose();
      }
    }
  }
  return out;
}
