export { runConformance } from "./suite.js";
export { checkConformance, selectCases, type CaseOutcome, type ConformanceOptions } from "./check.js";
export { conformanceCases } from "./cases.js";
export { caseName, type ConformanceCase, type ShapeClass } from "./case.js";
export { checkCase, caseInputs, unsupportedReason } from "./run-case.js";
export { supportMatrix } from "./support-matrix.js";
export { TOLERANCES, compareValues, type Tolerance } from "./tolerance.js";
export { seededRandom, hashString } from "./rng.js";
