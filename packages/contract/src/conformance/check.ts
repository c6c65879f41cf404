import type { Backend } from "../backend.js";
import type { FloatDType } from "../dtype.js";
import { createReferenceBackend } from "../reference/reference-backend.js";
import { type ConformanceCase, caseName } from "./case.js";
import { conformanceCases } from "./cases.js";
import { throughPrepare } from "./prepared-calls.js";
import { checkCase, unsupportedReason } from "./run-case.js";

export interface ConformanceOptions {
  /** Float dtypes to try (default all three). */
  dtypes?: readonly FloatDType[];
  /** Keep only the cases this returns true for. */
  filter?: (c: ConformanceCase) => boolean;
  /** A reason to skip a case the backend declares but cannot run here; undefined runs it. */
  skip?: (c: ConformanceCase) => string | undefined;
  /** Every call through the backend's `prepare`, checked not to take more kernel scratch than that reserved (throughPrepare). */
  prepared?: boolean;
}

export interface CaseOutcome {
  name: string;
  case: ConformanceCase;
  status: "passed" | "failed" | "skipped";
  /** Problems when failed, the reason when skipped. */
  details: string[];
}

/** The cases a run would register, in order. */
export function selectCases(options: ConformanceOptions = {}): ConformanceCase[] {
  return conformanceCases(options.dtypes).filter((c) => options.filter?.(c) ?? true);
}

/** Runs the suite without a test runner and returns each case's outcome. */
export async function checkConformance(tested: Backend, options: ConformanceOptions = {}): Promise<CaseOutcome[]> {
  const backend = options.prepared ? throughPrepare(tested) : tested;
  const reference = createReferenceBackend();
  const out: CaseOutcome[] = [];
  try {
    for (const c of selectCases(options)) {
      const reason = unsupportedReason(backend, c) ?? options.skip?.(c);
      if (reason) {
        out.push({ name: caseName(c), case: c, status: "skipped", details: [reason] });
        continue;
      }
      let details: string[];
      try {
        details = await checkCase(backend, reference, c);
      } catch (err) {
        details = [`threw: ${err instanceof Error ? err.message : String(err)}`];
      }
      out.push({ name: caseName(c), case: c, status: details.length ? "failed" : "passed", details });
    }
  } finally {
    reference.dispose();
  }
  return out;
}
