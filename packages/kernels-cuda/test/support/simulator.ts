import type { Backend } from "@kiln/contract";
import { createCudaSimBackend, cudaStatus } from "../../src/index.js";

/** Why the simulator tests cannot run here (not built: no clang++ or no CUDA headers), or undefined. */
export function simulatorSkipReason(): string | undefined {
  const sim = cudaStatus().simulator;
  return sim.built ? undefined : sim.detail;
}

/** Two simulator backends, labelled: blocks and threads in order, and both reversed. */
export function simulatorInBothOrders(): [string, Backend][] {
  return [
    ["in order", createCudaSimBackend()],
    ["blocks and threads reversed", createCudaSimBackend({ reverseBlocks: true, reverseThreads: true })],
  ];
}
