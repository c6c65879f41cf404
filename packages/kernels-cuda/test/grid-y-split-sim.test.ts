import { describe, expect, it } from "vitest";
import { runConformance } from "@kiln/contract/conformance/vitest";
import { createCudaSimBackend } from "../src/index.js";
import { simulatorSkipReason } from "./support/simulator.js";

// The Mamba2 and Mamba3 scans' kernels give each (batch item, head) a block row along grid.y, whose
// limit on a GPU is 65535: above it (batch x heads > 65535) a launch is split into slices.
// Shapes that large do not fit a simulator run, so the simulator is told the limit is 3:
// every SSD and Mamba3 conformance case with more than 3 (batch, head) pairs then takes several
// launches (the last one shorter), and the simulator aborts any launch whose grid.y is
// above the limit it was given.
const skip = simulatorSkipReason();
if (skip) it.skip(`cuda-sim with grid.y split at 3: ${skip}`, () => {});
else {
  runConformance(() => createCudaSimBackend({ maxGridY: 3 }), {
    name: "cuda-sim, grid.y split at 3",
    filter: (c) => ["ssdScanForward", "ssdScanBackward", "mamba3ScanForward", "mamba3ScanBackward"].includes(c.kernel),
  });
  describe("the simulator's grid.y limit", () => {
    it("is refused outside 1..65535", () => {
      expect(() => createCudaSimBackend({ maxGridY: 0 })).toThrow(/maxGridY must be between 1 and 65535/);
      expect(() => createCudaSimBackend({ maxGridY: 70000 })).toThrow(/maxGridY must be between 1 and 65535/);
    });
  });
}
