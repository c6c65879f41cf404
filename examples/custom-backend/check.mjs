// Runs the contract's conformance cases on the js backend, without a test runner.
// Prints each failure (the case, then what was wrong) and a closing count; exits 1 on a failure.
import { checkConformance, supportMatrix } from "@kiln/contract/conformance";
import { createJsBackend } from "./js-backend.mjs";

const backend = createJsBackend();
console.log(supportMatrix(backend));
const outcomes = await checkConformance(backend);
for (const o of outcomes.filter((x) => x.status === "failed")) console.log(`FAILED ${o.name}\n  ${o.details.join("\n  ")}`);
const count = (status) => outcomes.filter((o) => o.status === status).length;
console.log(`${count("passed")} passed, ${count("failed")} failed, ${count("skipped")} skipped`);
backend.dispose();
process.exitCode = count("failed") > 0 ? 1 : 0;
