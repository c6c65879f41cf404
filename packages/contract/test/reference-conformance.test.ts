import { runConformance } from "@kiln/contract/conformance/vitest";
import { createReferenceBackend } from "@kiln/contract";

// The reference backend checked against itself still exercises the suite's
// plumbing: guards, in-place cases, derived inputs, unmodified inputs.
runConformance(() => createReferenceBackend(), { name: "reference" });
