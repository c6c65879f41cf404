import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Backend, createReferenceBackend } from "@kiln/contract";
import { type ConformanceCase, caseName, checkCase } from "@kiln/contract/conformance";
import { createCudaSimBackend, cudaStatus } from "../../src/index.js";

/** An H100's shared memory a block (opt-in), for KILN_SIM_SHARED_PER_BLOCK: kernels then take the paths they take there. */
export const H100_SHARED_PER_BLOCK = 232448;

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

/**
 * A describe block that checks every case against the f64 reference on the simulator
 * schedules (all three, or the first `schedulesFor(index)` of them), skipped with the
 * reason when the simulator is not built. `env` is set while the backends open (the
 * addon reads KILN_MATMUL_PATH and the like then).
 */
export function describeCasesOnSchedules(title: string, cases: ConformanceCase[], schedulesFor: (index: number) => number = () => 3, env: Record<string, string> = {}): void {
  const skip = simulatorSkipReason();
  describe.skipIf(skip)(`${title}${skip ? ` (skipped: ${skip})` : ""}`, () => {
    let backends: [string, Backend][];
    const reference = createReferenceBackend();
    beforeAll(() => {
      Object.assign(process.env, env);
      try {
        backends = simulatorSchedules();
      } finally {
        for (const k of Object.keys(env)) delete process.env[k];
      }
    });
    afterAll(() => {
      for (const [, b] of backends ?? []) b.dispose();
      reference.dispose();
    });
    cases.forEach((c, i) => {
      it(caseName(c), async () => {
        for (const [schedule, backend] of backends.slice(0, schedulesFor(i))) {
          const problems = await checkCase(backend, reference, { ...c, args: { ...c.args, dtype: c.dtype } });
          expect(problems, schedule).toEqual([]);
        }
      }, 300_000);
    });
  });
}
