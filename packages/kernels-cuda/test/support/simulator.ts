import type { Backend } from "@kiln/contract";
import { createCudaSimBackend, cudaStatus } from "../../src/index.js";

/** Why the simulator tests cannot run here (not built: no clang++ or no CUDA headers), or undefined. */
export function simulatorSkipReason(): string | undefined {
  const sim = cudaStatus().simulator;
  return sim.built ? undefined : sim.detail;
}

/**
 * Three simulator backends, labelled: blocks and threads in order; both reversed; and
 * threads reversed with warps let past warp exchanges one at a time (the last warp runs
 * ahead to each barrier alone).
 */
export function simulatorSchedules(): [string, Backend][] {
  return [
    ["in order", createCudaSimBackend()],
    ["blocks and threads reversed", createCudaSimBackend({ reverseBlocks: true, reverseThreads: true })],
    ["warps in turn, threads reversed", createCudaSimBackend({ reverseThreads: true, warpsInTurn: true })],
  ];
}
