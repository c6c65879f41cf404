import { cudaStatus } from "../../src/index.js";

/** Why the simulator tests cannot run here (not built: no clang++ or no CUDA headers), or undefined. */
export function simulatorSkipReason(): string | undefined {
  const sim = cudaStatus().simulator;
  return sim.built ? undefined : sim.detail;
}
