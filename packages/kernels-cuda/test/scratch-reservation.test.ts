import { describe, expect, it } from "vitest";
import { runConformance } from "@kiln/contract/conformance/vitest";
import { createCudaSimBackend } from "../src/index.js";
import { simulatorSkipReason } from "./support/simulator.js";

// A prepared call reserves the scratch its kernel will ask for (the launcher run with
// nothing launched), so that steps allocate nothing and graphs recorded later never go
// stale. Every conformance case runs through prepare() (the suite's `prepared` option)
// in test/conformance-sim.test.ts's first pass, where a run that grows the scratch
// beyond what its preparation reserved fails the case; here, the other branch of the
// attention backward's launcher.

const skip = simulatorSkipReason();
if (skip) {
  it.skip(`scratch reservation: ${skip}`, () => {});
} else {
  describe("prepared calls reserve their kernels' scratch", () => {
    it("reserves when prepared, not when run; a graph recorded afterwards stays valid", async () => {
      const b = createCudaSimBackend();
      try {
        // sumRows over many rows sums per-chunk partials in scratch.
        const rows = 4096, cols = 33;
        const x = b.alloc(4 * rows * cols), out = b.alloc(4 * cols);
        b.kernels.fill({ out: x, n: rows * cols, value: 1, dtype: "f32" });
        const before = b.memoryStats().kernelScratchBytes ?? 0;
        const run = b.prepare!("sumRows", { x, out, rows, cols, dtype: "f32" });
        const reserved = b.memoryStats().kernelScratchBytes ?? 0;
        expect(reserved).toBeGreaterThan(before);
        b.graphs!.begin();
        run();
        const graph = b.graphs!.end();
        expect(b.graphs!.launch(graph)).toBe(true);
        expect(b.memoryStats().kernelScratchBytes).toBe(reserved);
        const sums = new Float32Array(cols);
        await b.download(out, sums);
        expect(Array.from(sums)).toEqual(new Array(cols).fill(rows));
        b.graphs!.release(graph);
      } finally {
        b.dispose();
      }
    });

    it("counts nothing for kernels that take no scratch", () => {
      const b = createCudaSimBackend();
      try {
        const out = b.alloc(64);
        b.prepare!("fill", { out, n: 16, value: 2, dtype: "f32" })();
        expect(b.memoryStats().kernelScratchBytes).toBe(0);
      } finally {
        b.dispose();
      }
    });
  });

  describe("KILN_ATTENTION_DQ=recompute", () => {
    // The default backward's scratch holds the stored dS (the largest of any kernel); the
    // recomputing one's holds D alone, sized by its own branch of the launcher.
    runConformance(
      () => {
        process.env.KILN_ATTENTION_DQ = "recompute";
        try {
          return createCudaSimBackend();
        } finally {
          delete process.env.KILN_ATTENTION_DQ;
        }
      },
      { name: "cuda-sim, dQ recomputed, every call prepared", prepared: true, filter: (c) => c.kernel === "attentionBackward" && c.dtype === "bf16" },
    );
  });
}
