// The vitest-only entry: registers the conformance cases as vitest tests.
export { runConformance } from "./suite.js";
