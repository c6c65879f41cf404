import { afterAll, beforeAll, describe, it } from "vitest";
import { runConformance } from "@kiln/contract/conformance/vitest";
import { createCudaSimBackend } from "../src/index.js";
import { simulatorSkipReason } from "./support/simulator.js";

// Every kernel x dtype x shape class of the contract, run by the CUDA sources
// compiled for the host, against the reference oracle, blocks and threads in order
// (conformance-sim-reversed.test.ts runs them in reverse). bf16/f16
// matmuls (the pipelined mma kernel, or WMMA where an operand's layout rules out
// 16-byte copies), grouped matmuls and attention take the tensor-core kernels by
// default, as on a GPU; a second pass runs them on the CUDA-core kernels (KILN_MATMUL_PATH=simt,
// KILN_ATTENTION_PATH=simt, read when a backend opens), a third the bf16/f16 matmuls
// on the WMMA kernel alone (KILN_MATMUL_PATH=wmma), and a fourth the bf16/f16 attention
// forward on the WMMA kernel instead of the mma.sync one (KILN_ATTENTION_PATH=wmma).
const skip = simulatorSkipReason();
if (skip) {
  it.skip(`cuda-sim conformance: ${skip}`, () => {});
} else {
  runConformance(() => createCudaSimBackend(), { name: "cuda-sim" });
  describe("KILN_MATMUL_PATH=simt KILN_ATTENTION_PATH=simt", () => {
    beforeAll(() => {
      process.env.KILN_MATMUL_PATH = "simt";
      process.env.KILN_ATTENTION_PATH = "simt";
    });
    afterAll(() => {
      delete process.env.KILN_MATMUL_PATH;
      delete process.env.KILN_ATTENTION_PATH;
    });
    const cudaCores = (c: { kernel: string; dtype: string }) => ["matmul", "groupedMatmul", "groupedMatmulWeightGrad", "attentionForward", "attentionBackward"].includes(c.kernel) && c.dtype !== "f32";
    runConformance(() => createCudaSimBackend(), { name: "cuda-sim, CUDA-core matmul and attention", filter: cudaCores });
  });
  describe("KILN_MATMUL_PATH=wmma", () => {
    beforeAll(() => {
      process.env.KILN_MATMUL_PATH = "wmma";
    });
    afterAll(() => {
      delete process.env.KILN_MATMUL_PATH;
    });
    const wmma = (c: { kernel: string; dtype: string }) => c.kernel === "matmul" && c.dtype !== "f32";
    runConformance(() => createCudaSimBackend(), { name: "cuda-sim, WMMA matmul", filter: wmma });
  });
  describe("KILN_ATTENTION_PATH=wmma", () => {
    beforeAll(() => {
      process.env.KILN_ATTENTION_PATH = "wmma";
    });
    afterAll(() => {
      delete process.env.KILN_ATTENTION_PATH;
    });
    const wmma = (c: { kernel: string; dtype: string }) => c.kernel === "attentionForward" && c.dtype !== "f32";
    runConformance(() => createCudaSimBackend(), { name: "cuda-sim, WMMA attention forward", filter: wmma });
  });
}
