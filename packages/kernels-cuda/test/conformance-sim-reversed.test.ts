import { it } from "vitest";
import { runConformance } from "@kiln/contract/conformance/vitest";
import { createCudaSimBackend } from "../src/index.js";
import { simulatorSkipReason } from "./support/simulator.js";

// The conformance suite again with the grid's blocks and each block's threads run
// in reverse order (conformance-sim.test.ts runs them in order): a kernel whose
// result depends on the order of blocks or threads fails one of the two. Warps also
// go past warp exchanges one at a time, each running ahead alone to the next
// __syncthreads: a barrier missing between warps that share shared memory shows.
// A file of its own so that the two passes run side by side.
const skip = simulatorSkipReason();
if (skip) it.skip(`cuda-sim conformance, reversed order: ${skip}`, () => {});
else runConformance(() => createCudaSimBackend({ reverseBlocks: true, reverseThreads: true, warpsInTurn: true }), { name: "cuda-sim, blocks and threads reversed, warps in turn" });
