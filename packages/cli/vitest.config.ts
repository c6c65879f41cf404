import { defineConfig } from "vitest/config";
import { kilnVitestConfig } from "@kiln/tooling/vitest";

export default defineConfig(kilnVitestConfig({ name: "cli", runFirst: ["test/e2e/train-cuda-sim.test.ts", "test/e2e/docs-commands.test.ts", "test/e2e/train-dtype.test.ts", "test/e2e/tensorboard-python.test.ts", "test/e2e/init-from.test.ts"], globalSetup: "test/e2e/support/build-cli.ts" }));
