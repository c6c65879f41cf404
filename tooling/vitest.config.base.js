// Shared vitest settings: tests import workspace packages from their TypeScript
// sources (the "@kiln/source" export condition), so no build is needed to test.
import { existsSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import os from "node:os";
import path from "node:path";
import { BaseSequencer } from "vitest/node";

const here = path.dirname(fileURLToPath(import.meta.url));
const conditions = ["@kiln/source", "import", "module", "node", "default"];

/**
 * Orders a package's test files for its workers: the files named in `first` (paths
 * relative to the package, the longest first), then the others, larger files first.
 * vitest's own order puts the file of the longest last run first, but a fresh clone
 * has no last run and so orders by size alone, and a long test in a small file (a
 * build plus a run under a sanitizer) then starts last and runs alone on one core
 * while the others idle.
 * @param {string[]} first
 */
function sequencerRunningFirst(first) {
  return class extends BaseSequencer {
    /** @param {import("vitest/node").TestSpecification[]} files */
    async sort(files) {
      const root = this.ctx.config.root;
      for (const f of first) if (!existsSync(path.join(root, f))) throw new Error(`vitest config: runFirst names ${f}, which is not a file of ${root}`);
      const key = new Map(files.map((f) => [f, { rank: first.indexOf(path.relative(root, f.moduleId)), size: statSync(f.moduleId).size }]));
      const rank = (f) => (key.get(f).rank < 0 ? first.length : key.get(f).rank);
      return [...files].sort((a, b) => rank(a) - rank(b) || key.get(b).size - key.get(a).size);
    }
  };
}

/**
 * @param {{ name: string, testTimeout?: number, globalSetup?: string | string[], runFirst?: string[] }} opts
 * runFirst: the package's longest test files, longest first, started before the others.
 */
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
      sequence: { sequencer: sequencerRunningFirst(opts.runFirst ?? []) },
      ...(opts.globalSetup === undefined ? {} : { globalSetup: opts.globalSetup }),
    },
  };
}
