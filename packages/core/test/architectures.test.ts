import { describe, expect, it } from "vitest";
import { ARCHITECTURES, ARCH_NAMES, type Arch, buildTrainingGraph, modelConfigProblem, paramLayout, resolveModelConfig } from "../src/index.js";

const small = (arch: Arch) => resolveModelConfig({ arch, vocabSize: 37, hiddenSize: 24, numLayers: 2, numHeads: 4, kvHeads: arch === "gpt2" ? 4 : 2, maxSeqLen: 16 });

describe("architecture registry", () => {
  it("names every architecture once", () => {
    expect(ARCH_NAMES).toEqual(Object.keys(ARCHITECTURES));
    expect(new Set(ARCH_NAMES).size).toBe(ARCH_NAMES.length);
  });

  for (const arch of ARCH_NAMES) {
    describe(arch, () => {
      it("has unique parameter names, every one read by the forward pass", () => {
        const c = small(arch);
        const layout = paramLayout(c);
        const names = layout.specs.map((s) => s.name);
        expect(new Set(names).size).toBe(names.length);
        const g = buildTrainingGraph(c, layout, 2, 8, "none").graph;
        const read = new Set<number>();
        for (const n of g.nodes.filter((n) => !n.backward)) for (const t of n.inputs) read.add(t);
        const unread = names.filter((name) => ![...read].some((t) => g.info(t).kind === "param" && g.info(t).name === name));
        expect(unread).toEqual([]);
      });

      it("puts every block's nodes under its block prefix", () => {
        const c = small(arch);
        const g = buildTrainingGraph(c, paramLayout(c), 2, 8, "none").graph;
        const prefix = ARCHITECTURES[arch].blockPrefix;
        const blocks = new Set(g.nodes.filter((n) => n.scope.startsWith(`${prefix}.`)).map((n) => n.scope.split(".").slice(0, prefix.split(".").length + 1).join(".")));
        expect([...blocks].sort()).toEqual([...Array(c.numLayers).keys()].map((i) => `${prefix}.${i}`).sort());
      });

      it("accepts its small config and refuses heads that do not divide the hidden size", () => {
        expect(modelConfigProblem(small(arch))).toBeUndefined();
        expect(modelConfigProblem({ ...small(arch), hiddenSize: 26 })).toMatchObject({ field: "hiddenSize", message: "hidden size 26 is not divisible by the 4 heads" });
      });
    });
  }

  it("refuses what one architecture cannot build", () => {
    expect(modelConfigProblem({ ...small("gpt2"), kvHeads: 2 })).toMatchObject({ field: "kvHeads" });
    expect(modelConfigProblem({ ...small("llama"), hiddenSize: 20, numHeads: 4, kvHeads: 4 })).toMatchObject({ field: "numHeads", message: expect.stringContaining("odd") });
    expect(modelConfigProblem({ ...small("llama"), numHeads: 4, kvHeads: 3 })).toMatchObject({ field: "kvHeads" });
  });

  it("fills each architecture's defaults", () => {
    expect(small("gpt2")).toMatchObject({ intermediateSize: 96, normEps: 1e-5, tieEmbeddings: true });
    expect(small("llama")).toMatchObject({ intermediateSize: 64, normEps: 1e-6, tieEmbeddings: false });
  });
});
