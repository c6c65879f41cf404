import { describeCasesOnSchedules } from "./support/simulator.js";
import { attentionCases } from "./support/attention-cases.js";

// The bf16/f16 attention on Hopper's wgmma (csrc/attention_forward_wgmma.cu: each
// product one warpgroup's wgmma from 128-byte-swizzled shared memory, probabilities
// fed back as register operands) on the simulator, which emulates wgmma's descriptors,
// swizzle and fragments, on the shapes of support/attention-cases.ts.
// KILN_ATTENTION_PATH=wgmma is read when a backend opens; the cases whose rows rule out
// 16-byte copies take the mma.sync kernels instead, as do backward cases with docStarts
// above head size 64 (csrc/attention_backward_wgmma.cu). Both block sizes: one warpgroup of
// 64 rows (the default) and two sharing each loop tile (KILN_ATTENTION_WGMMA_ROWS=128).

describeCasesOnSchedules("wgmma attention on cuda-sim, blocks of 64 rows", attentionCases, () => 3, { KILN_ATTENTION_PATH: "wgmma" });
describeCasesOnSchedules("wgmma attention on cuda-sim, blocks of 128 rows", attentionCases, () => 2, { KILN_ATTENTION_PATH: "wgmma", KILN_ATTENTION_WGMMA_ROWS: "128" });
