import { describeCasesOnSchedules } from "./support/simulator.js";
import { attentionCases } from "./support/attention-cases.js";

// The bf16/f16 attention on mma.sync (csrc/attention_forward_mma.cu and
// attention_backward_mma.cu: scores, probabilities and gradients in registers, loop
// tiles double buffered) on the shapes of support/attention-cases.ts: by default the
// forward's key tiles of 64 at heads up to 64 and the backward's dQ from the stored dS.

describeCasesOnSchedules("mma.sync attention on cuda-sim", attentionCases);
// The forward's key tiles of 32 for heads up to 64 (KILN_ATTENTION_MMA_KEYS=32): its cases only.
describeCasesOnSchedules(
  "mma.sync attention forward on cuda-sim, key tiles of 32",
  attentionCases.filter((c) => c.kernel === "attentionForward"),
  () => 2,
  { KILN_ATTENTION_MMA_KEYS: "32" },
);
// The backward's dQ pass recomputing S and dP (KILN_ATTENTION_DQ=recompute; above head size 64 it always does).
describeCasesOnSchedules(
  "mma.sync attention backward on cuda-sim, dQ recomputed",
  attentionCases.filter((c) => c.kernel === "attentionBackward"),
  () => 2,
  { KILN_ATTENTION_DQ: "recompute" },
);
