import { defineConfig } from "vitest/config";
import { kilnVitestConfig } from "@kiln/tooling/vitest";

export default defineConfig(kilnVitestConfig({ name: "contract", runFirst: ["test/reference-conformance.test.ts", "test/packed-install.test.ts"] }));
