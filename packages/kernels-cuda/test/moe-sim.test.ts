import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Backend, createReferenceBackend } from "@kiln/contract";
import { type ConformanceCase, caseName, checkCase } from "@kiln/contract/conformance";
import { createCudaSimBackend } from "../src/index.js";
import { simulatorSchedules, simulatorSkipReason } from "./support/simulator.js";

// Mixture-of-experts kernels on shapes the conformance suite does not reach, against
// the reference oracle: 128 x 128 grouped-matmul tiles, more groups than one block
// scans at a time (256), more experts than the routing scan's block (1024), topK
// over a warp, several routing chunks. Blocks and threads run in both orders and with
// warps in turn, and 16-bit grouped matmuls on tensor cores (the default) and CUDA cores. Slow (about
// 30 s: emulated tensor-core fragments, and the f64 oracle once per backend).
const skip = simulatorSkipReason();

const cases: ConformanceCase[] = [
  { kernel: "groupedMatmul", dtype: "f32", shape: "large", label: "128x128 tiles", args: { rows: 1030, n: 1800, k: 8, groups: 2 } },
  { kernel: "groupedMatmul", dtype: "bf16", shape: "large", label: "128x128 tiles transB accumulate", args: { rows: 1030, n: 1800, k: 8, groups: 2, transB: true, accumulate: true } },
  { kernel: "groupedMatmul", dtype: "f16", shape: "batch", label: "260 groups", args: { rows: 300, n: 20, k: 9, groups: 260, transB: true } },
  { kernel: "groupedMatmulWeightGrad", dtype: "f32", shape: "large", label: "128x128 tiles", args: { rows: 150, n: 640, k: 600, groups: 6 } },
  { kernel: "groupedMatmulWeightGrad", dtype: "f16", shape: "large", label: "128x128 tiles", args: { rows: 40, n: 256, k: 256, groups: 32 } },
  { kernel: "groupedMatmulWeightGrad", dtype: "bf16", shape: "batch", label: "300 groups", args: { rows: 500, n: 7, k: 33, groups: 300 } },
  { kernel: "moeRoute", dtype: "f32", shape: "large", label: "1100 experts", args: { tokens: 40, numExperts: 1100, topK: 3, alpha: 0.01 } },
  { kernel: "moeRoute", dtype: "bf16", shape: "large", label: "topK 40 of 64, 3 chunks", args: { tokens: 300, numExperts: 64, topK: 40, alpha: 0.1 } },
  { kernel: "moeDispatch", dtype: "bf16", shape: "large", label: "topK 6", args: { tokens: 50, topK: 6, dim: 136 }, present: ["scale"] },
  { kernel: "moeCombine", dtype: "f32", shape: "large", label: "topK 6 accumulate", args: { tokens: 50, topK: 6, dim: 136, accumulate: true }, present: ["scale"] },
  { kernel: "moeCombineScaleGrad", dtype: "f16", shape: "long", label: "dim 3000", args: { tokens: 5, topK: 3, dim: 3000 } },
];

describe.skipIf(skip)(`MoE kernels beyond the conformance shapes on cuda-sim${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let backends: [string, Backend][];
  const reference = createReferenceBackend();
  beforeAll(() => {
    backends = simulatorSchedules();
    process.env.KILN_MATMUL_PATH = "simt";  // read when a backend opens
    try {
      backends.push(["KILN_MATMUL_PATH=simt", createCudaSimBackend()]);
    } finally {
      delete process.env.KILN_MATMUL_PATH;
    }
  });
  afterAll(() => {
    for (const [, b] of backends ?? []) b.dispose();
    reference.dispose();
  });

  for (const c of cases) {
    it(caseName(c), async () => {
      const simtToo = c.kernel.startsWith("grouped") && c.dtype !== "f32";
      for (const [order, backend] of backends.slice(0, simtToo ? 4 : 3)) {
        const problems = await checkCase(backend, reference, { ...c, args: { ...c.args, dtype: c.dtype } });
        expect(problems, order).toEqual([]);
      }
    }, 120_000);
  }
});
