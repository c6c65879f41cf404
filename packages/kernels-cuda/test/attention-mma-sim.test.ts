import { describeCasesOnSchedules } from "./support/simulator.js";
import { attentionCases } from "./support/attention-cases.js";

// The bf16/f16 attention on mma.sync (csrc/attention_forward_mma.cu and
// attention_backward_mma.cu: scores, probabilities and gradients in registers, loop
// tiles double buffered) on the shapes of support/attention-cases.ts.

describeCasesOnSchedules("mma.sync attention on cuda-sim", attentionCases);
// The forward's key tiles of 64 for heads up to 64 (KILN_ATTENTION_MMA_KEYS=64): its cases only.
describeCasesOnSchedules(
  "mma.sync attention forward on cuda-sim, key tiles of 64",
  attentionCases.filter((c) => c.kernel === "attentionForward"),
  () => 2,
  { KILN_ATTENTION_MMA_KEYS: "64" },
);
// The backward's dQ from the dS its dK/dV pass stored (KILN_ATTENTION_DQ=stored-ds; heads up to 64, the others recompute).
describeCasesOnSchedules(
  "mma.sync attention backward on cuda-sim, dQ from the stored dS",
  attentionCases.filter((c) => c.kernel === "attentionBackward"),
  () => 2,
  { KILN_ATTENTION_DQ: "stored-ds" },
);
