// Shared vitest settings: tests import workspace packages from their TypeScript
// sources (the "@kiln/source" export condition), so no build is needed to test.
import { fileURLToPath } from "node:url";
import os from "node:os";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const conditions = ["@kiln/source", "import", "module", "node", "default"];

/** @param {{ name: string, testTimeout?: number, globalSetup?: string | string[] }} opts */
export function kilnVitestConfig(opts) {
  return {
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: ["@kiln/source"] } },
    test: {
      name: opts.name,
      include: ["test/**/*.test.ts"],
      // vitest's default in run mode is one worker fewer than the cores: a single worker
      // on a 2-core machine. Test files run side by side on every core instead.
      maxWorkers: os.availableParallelism(),
      testTimeout: opts.testTimeout ?? 60_000,
      hookTimeout: 120_000,
      reporters: ["default", path.join(here, "vitest-count-reporter.js")],
      ...(opts.globalSetup === undefined ? {} : { globalSetup: opts.globalSetup }),
    },
  };
}
