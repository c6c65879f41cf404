import { defineConfig } from "vitest/config";
import { kilnVitestConfig } from "@kiln/tooling/vitest";

export default defineConfig(kilnVitestConfig({ name: "core", runFirst: ["test/memory-plan-wasm.test.ts", "test/trainer-state.test.ts", "test/data-tokenize-files.test.ts"] }));
