// Runner-free conformance API: nothing here imports a test framework.
// runConformance (vitest cases) is in "@kiln/contract/conformance/vitest".
export { checkConformance, selectCases, type CaseOutcome, type ConformanceOptions } from "./check.js";
export { conformanceCases } from "./cases.js";
export { caseName, type ConformanceCase, type ShapeClass } from "./case.js";
export { checkCase, caseInputs, unsupportedReason } from "./run-case.js";
export { throughPrepare } from "./prepared-calls.js";
export { supportMatrix } from "./support-matrix.js";
export { TOLERANCES, compareValues, type Tolerance } from "./tolerance.js";
export { seededRandom, hashString } from "./rng.js";
