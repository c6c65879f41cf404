import { it } from "vitest";
import { runConformance } from "@kiln/contract/conformance";
import { createCudaSimBackend } from "../src/index.js";
import { simulatorSkipReason } from "./support/simulator.js";

// Every kernel x dtype x shape class of the contract, run by the CUDA sources
// compiled for the host, against the reference oracle. A second pass runs the
// grid's blocks and each block's threads in reverse order: a kernel whose result
// depends on the order of blocks or threads fails one of the two.
const skip = simulatorSkipReason();
if (skip) {
  it.skip(`cuda-sim conformance: ${skip}`, () => {});
} else {
  runConformance(() => createCudaSimBackend(), { name: "cuda-sim" });
  runConformance(() => createCudaSimBackend({ reverseBlocks: true, reverseThreads: true }), { name: "cuda-sim, blocks and threads reversed" });
}
