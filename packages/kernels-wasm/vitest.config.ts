import { defineConfig } from "vitest/config";
import { kilnVitestConfig } from "@kiln/tooling/vitest";

const base = kilnVitestConfig({ name: "kernels-wasm", runFirst: ["test/conformance.test.ts"] });

export default defineConfig({ ...base, test: { ...base.test, globalSetup: ["test/build-kernels.ts"] } });
