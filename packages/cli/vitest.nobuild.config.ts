import { defineConfig } from "vitest/config"; import { kilnVitestConfig } from "@kiln/tooling/vitest"; export default defineConfig(kilnVitestConfig({ name: "cli" }));
