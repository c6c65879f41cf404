import { describe, expect, it } from "vitest";
import { type FloatDType, type KernelName, kernelSpecs } from "@kiln/contract";
import type { KernelNodeAttrs } from "../src/graph/kernel-node.js";
import { ARCH_NAMES, type Arch, buildTrainingGraph, paramLayout, resolveModelConfig } from "../src/index.js";

const small = (arch: Arch) => resolveModelConfig({ arch, vocabSize: 37, hiddenSize: 24, numLayers: 2, numHeads: 4, kvHeads: arch === "gpt2" ? 4 : 2, maxSeqLen: 16 });
// Every kind of layer that has parameters: Mamba2 (conv1d, scan parameters, gated norm), latent attention, experts.
const variants = {
  ...Object.fromEntries(ARCH_NAMES.map((a) => [a, small(a)])),
  hybrid: { ...small("llama"), mambaLayers: [1], mamba2HeadDim: 12, mamba2StateSize: 8, mamba2ChunkSize: 4, numExperts: 3, sharedExpert: true },
  mla: { ...small("llama"), kvLatentDim: 12, qLatentDim: 10, ropeDim: 4 },
  mamba3: { ...small("llama"), mambaLayers: [0], mamba2HeadDim: 12, mamba2StateSize: 8, mamba2ChunkSize: 4, mamba3Enabled: true, mamba3MimoRank: 2 },
  "mamba3-conv": { ...small("llama"), mambaLayers: [1], mamba2HeadDim: 12, mamba2StateSize: 5, mamba2ChunkSize: 4, mamba3Enabled: true, mamba3ComplexRope: false, mamba3UseConv: true },
};

// bf16/f16 training sums parameter gradients in f32: every kernel that writes one is told to write f32.
describe.each(["bf16", "f16"] as FloatDType[])("%s training graphs keep parameter gradients in f32", (dtype) => {
  it.each(Object.keys(variants))("%s", (name) => {
    const config = variants[name as keyof typeof variants];
    const layout = paramLayout(config, dtype);
    const { graph: g, training } = buildTrainingGraph(config, layout, 2, 8, "none");
    expect(training!.paramGrads.size).toBe(layout.specs.length);
    for (const grad of training!.paramGrads.values()) expect(g.info(grad).dtype, g.info(grad).name).toBe("f32");
    let writes = 0;
    for (const node of g.nodes) {
      const a = node.attrs as unknown as KernelNodeAttrs;
      const spec = kernelSpecs[a.kernel as KernelName] as { operands(args: unknown): { key: string; dtype: string }[] };
      const declared = new Map(spec.operands(a.args).map((o) => [o.key, o.dtype]));
      for (const [key, bound] of Object.entries(a.operands)) {
        const t = g.info(bound.id);
        // The kernel's own dtype claim for each operand matches the tensor it is bound to.
        expect(declared.get(key), `${a.kernel}.${key} bound to ${t.name}`).toBe(t.dtype);
        if (t.kind === "grad") writes++;
      }
      if (node.backward && a.args.dtype !== undefined && a.args.dtype !== "f32") expect(a.args.dtype).toBe(dtype);
    }
    expect(writes).toBeGreaterThanOrEqual(layout.specs.length);
  });
});
