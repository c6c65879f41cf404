import { afterAll, beforeAll, describe, it } from "vitest";
import type { Backend } from "../backend.js";
import { createReferenceBackend } from "../reference/reference-backend.js";
import { caseName } from "./case.js";
import { type ConformanceOptions, selectCases } from "./check.js";
import { throughPrepare } from "./prepared-calls.js";
import { checkCase, unsupportedReason } from "./run-case.js";

/**
 * Registers one vitest case per kernel x dtype x shape class, each comparing
 * `makeBackend()`'s output with the reference oracle. Call it at the top level
 * of a test file. A case the backend does not support is skipped with the reason
 * in its name.
 */
export function runConformance(makeBackend: () => Backend | Promise<Backend>, options: ConformanceOptions & { name?: string } = {}): void {
  const cases = selectCases(options);
  let backend: Backend | undefined;
  const reference = createReferenceBackend();
  describe(`conformance${options.name ? `: ${options.name}` : ""}`, () => {
    beforeAll(async () => {
      const made = await makeBackend();
      backend = options.prepared ? throughPrepare(made) : made;
    });
    afterAll(() => {
      backend?.dispose();
      reference.dispose();
    });
    // Capabilities are only known once the backend exists, so every case is registered
    // and decides at run time; skips report their reason through ctx.skip(note).
    for (const c of cases) {
      it(caseName(c), async (ctx) => {
        const reason = unsupportedReason(backend!, c) ?? options.skip?.(c);
        if (reason) {
          ctx.skip(`skipped: ${reason}`);
          return;
        }
        const problems = await checkCase(backend!, reference, c);
        if (problems.length) throw new Error(`${caseName(c)}\n  ${problems.join("\n  ")}`);
      });
    }
  });
}
