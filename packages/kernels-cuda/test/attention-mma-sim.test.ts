import { describeCasesOnSchedules } from "./support/simulator.js";
import { attentionCases } from "./support/attention-cases.js";

// The bf16/f16 attention on mma.sync (csrc/attention_forward_mma.cu and
// attention_backward_mma.cu: scores, probabilities and gradients in registers, loop
// tiles double buffered) on the shapes of support/attention-cases.ts.

describeCasesOnSchedules("mma.sync attention on cuda-sim", attentionCases);
