import { afterAll, beforeAll, describe, it } from "vitest";
import { runConformance } from "@kiln/contract/conformance/vitest";
import { createCudaSimBackend } from "../src/index.js";
import { H100_SHARED_PER_BLOCK, simulatorSkipReason } from "./support/simulator.js";

// Every kernel x dtype x shape class of the contract, run by the CUDA sources
// compiled for the host, against the reference oracle, blocks and threads in order.
// With KILN_TEST_SIM_REVERSED=1 (conformance-asan.test.ts runs this file so, on the
// simulator built with AddressSanitizer) every pass runs the grid's blocks and each
// block's threads in reverse order, with warps let past warp exchanges one at a time,
// each running ahead alone to the next __syncthreads: a kernel whose result depends on
// the order of blocks or threads fails one of the two runs, and a barrier missing
// between warps that share shared memory shows. bf16/f16
// matmuls (the pipelined mma kernel, or WMMA where an operand's layout rules out
// 16-byte copies), grouped matmuls and attention take the tensor-core kernels by
// default, as on a GPU; a second pass runs them on the CUDA-core kernels (KILN_MATMUL_PATH=simt,
// KILN_ATTENTION_PATH=simt, read when a backend opens), a third the bf16/f16 matmuls
// on the WMMA kernel alone (KILN_MATMUL_PATH=wmma), a fourth on the sm_90 wgmma kernel
// (KILN_MATMUL_PATH=wgmma: the simulator presents an sm_80 device, so the default pass
// runs the mma.sync kernel, and the mma.sync attention with its defaults: key tiles of 64,
// dQ from the stored dS; test/attention-mma-sim.test.ts runs the others), a fifth bf16/f16 attention forward and backward on the
// WMMA kernels instead of the mma.sync ones (KILN_ATTENTION_PATH=wmma), and a sixth on
// the sm_90 wgmma kernels (KILN_ATTENTION_PATH=wgmma). A seventh runs the cross-entropy
// forward on a simulator with an H100's shared memory a block (KILN_SIM_SHARED_PER_BLOCK):
// GPT-2's padded bf16 rows then take the kernel's shared-memory copy, as on an H100.
// In order, the first pass makes every call through prepare(): issuing a prepared call
// must take no kernel scratch beyond what preparing it reserved (the path compiled
// training steps take). Reversed, it calls the kernels directly.
// KILN_TEST_SIM_PART=i/n runs the i-th of n interleaved parts of the cases (every n-th
// case of every pass), so that n processes can share the run.
type Case = { kernel: string; dtype: string };
const reversed = process.env.KILN_TEST_SIM_REVERSED === "1";
const schedule = reversed ? { reverseBlocks: true, reverseThreads: true, warpsInTurn: true } : {};
const scheduleName = reversed ? ", blocks and threads reversed, warps in turn" : "";
const part = /^(\d+)\/(\d+)$/.exec(process.env.KILN_TEST_SIM_PART ?? "");
let kept = 0;
/** `keep`, narrowed to this process's part of the cases (cases are selected in a fixed order). */
const inPart = (keep: (c: Case) => boolean) => (c: Case) => keep(c) && (!part || kept++ % Number(part[2]) === Number(part[1]) - 1);
const sixteenBit = (kernels: string[]) => (c: Case) => kernels.includes(c.kernel) && c.dtype !== "f32";

/** The suite's cases that `filter` keeps, on a simulator opened with `env` set (the addon reads it at open). */
function conformanceWith(env: Record<string, string>, name: string, filter: (c: Case) => boolean): void {
  describe(Object.entries(env).map(([k, v]) => `${k}=${v}`).join(" "), () => {
    beforeAll(() => {
      Object.assign(process.env, env);
    });
    afterAll(() => {
      for (const k of Object.keys(env)) delete process.env[k];
    });
    runConformance(() => createCudaSimBackend(schedule), { name: `${name}${scheduleName}`, filter: inPart(filter) });
  });
}

const skip = simulatorSkipReason();
if (skip) {
  it.skip(`cuda-sim conformance: ${skip}`, () => {});
} else {
  runConformance(() => createCudaSimBackend(schedule), { name: `cuda-sim${reversed ? scheduleName : ", every call prepared"}`, prepared: !reversed, filter: inPart(() => true) });
  const matmuls = ["matmul", "groupedMatmul", "groupedMatmulWeightGrad"], attention = ["attentionForward", "attentionBackward"];
  conformanceWith({ KILN_MATMUL_PATH: "simt", KILN_ATTENTION_PATH: "simt" }, "cuda-sim, CUDA-core matmul and attention", sixteenBit([...matmuls, ...attention]));
  conformanceWith({ KILN_MATMUL_PATH: "wmma" }, "cuda-sim, WMMA matmul", sixteenBit(["matmul"]));
  conformanceWith({ KILN_MATMUL_PATH: "wgmma" }, "cuda-sim, wgmma matmul", sixteenBit(["matmul"]));
  conformanceWith({ KILN_ATTENTION_PATH: "wmma" }, "cuda-sim, WMMA attention", sixteenBit(attention));
  conformanceWith({ KILN_ATTENTION_PATH: "wgmma" }, "cuda-sim, wgmma attention", sixteenBit(attention));
  conformanceWith({ KILN_SIM_SHARED_PER_BLOCK: String(H100_SHARED_PER_BLOCK) }, "cuda-sim, an H100's shared memory", (c) => c.kernel === "crossEntropyForward");
}
