// Prints one closing line per package ("<name>: N passed, N failed, N skipped")
// and records the counts so tooling/test.sh can sum them over the workspace.
import fs from "node:fs";
import path from "node:path";

export default class CountReporter {
  onInit(vitest) {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules, unhandledErrors) {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") counts.passed++;
        else if (state === "failed") counts.failed++;
        else counts.skipped++;
      }
      // A file that failed to load has no tests but must count as a failure.
      if (mod.state() === "failed" && mod.children.size === 0) counts.failed++;
    }
    counts.failed += unhandledErrors.length;
    const name = this.vitest?.config?.name || path.basename(process.cwd());
    const dir = process.env.KILN_TEST_RESULTS;
    if (dir) {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${name.replace(/[^\w.-]/g, "_")}.json`), JSON.stringify(counts));
    }
    console.log(`${name}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  }
}
