import { defineConfig } from "vitest/config";
import { kilnVitestConfig } from "@kiln/tooling/vitest";

export default defineConfig(kilnVitestConfig({ name: "kernels-cuda", runFirst: ["test/conformance-asan.test.ts", "test/conformance-sim.test.ts", "test/matmul-wgmma-sim.test.ts", "test/matmul-mma-sim.test.ts"] }));
