import { describe, expect, it } from "vitest";
import { ARCHITECTURES, ARCH_NAMES, type Arch, buildTrainingGraph, modelConfigProblem, paramLayout, resolveModelConfig, trainingFlopsPerToken } from "../src/index.js";

const small = (arch: Arch) => resolveModelConfig({ arch, vocabSize: 37, hiddenSize: 24, numLayers: 2, numHeads: 4, kvHeads: arch === "gpt2" ? 4 : 2, maxSeqLen: 16 });
// Llama's layers composed per index: Mamba2 in layer 1 (48 = 4 heads of 12), attention in layer 0.
const hybrid = () => ({ ...small("llama"), mambaLayers: [1], mamba2HeadDim: 12, mamba2StateSize: 8, mamba2ChunkSize: 4 });

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

  it("takes sliding windows where the family computes them, and refuses them elsewhere by key", () => {
    const sliding = ["sliding_attention", "full_attention"] as const;
    expect(modelConfigProblem({ ...small("mistral"), slidingWindow: 4 })).toBeUndefined();
    expect(modelConfigProblem({ ...small("qwen3"), slidingWindow: 4, layerTypes: [...sliding] })).toBeUndefined();
    expect(modelConfigProblem({ ...small("llama"), slidingWindow: 4 })).toMatchObject({ field: "slidingWindow", message: expect.stringContaining("llama computes full attention") });
    expect(modelConfigProblem({ ...small("gpt2"), slidingWindow: 4 })).toMatchObject({ field: "slidingWindow" });
    expect(modelConfigProblem({ ...small("mistral"), slidingWindow: 4, layerTypes: [...sliding] })).toMatchObject({ field: "layerTypes", message: expect.stringContaining("every layer") });
    expect(modelConfigProblem({ ...small("qwen2"), slidingWindow: 4, layerTypes: ["sliding_attention"] })).toMatchObject({ field: "layerTypes", message: "layer_types lists 1 layers; the model has 2" });
    expect(modelConfigProblem({ ...small("qwen2"), layerTypes: [...sliding] })).toMatchObject({ field: "layerTypes", message: expect.stringContaining("sliding_window is not set") });
    expect(modelConfigProblem({ ...small("gemma3"), slidingWindow: 4, layerTypes: [...sliding] })).toBeUndefined();
    expect(modelConfigProblem({ ...small("llama"), queryPreAttnScalar: 24 })).toMatchObject({ field: "queryPreAttnScalar", message: "query_pre_attn_scalar is a Gemma 3 setting; llama does not use it" });
  });

  it("passes each layer's window to its attention, and counts a window's keys in the FLOPs", () => {
    const c = { ...small("qwen2"), slidingWindow: 3, layerTypes: ["sliding_attention", "full_attention"] as ("sliding_attention" | "full_attention")[] };
    const g = buildTrainingGraph(c, paramLayout(c), 2, 8, "none").graph;
    const windows = g.nodes.filter((n) => (n.attrs as { kernel?: string }).kernel === "attentionForward").map((n) => (n.attrs as { args: { window?: number } }).args.window);
    expect(windows).toEqual([3, undefined]);
    const perLayer = 12 * 4 * 6;
    expect(trainingFlopsPerToken(small("qwen2"), 8) - trainingFlopsPerToken(c, 8)).toBe(perLayer * (8 - 3));
  });

  it("builds Mamba3 mixers with mamba3_enabled: every parameter read, the branches each key asks for", () => {
    const names = (c: ReturnType<typeof hybrid>) => paramLayout(c).specs.map((s) => s.name).filter((n) => n.includes(".mamba.")).map((n) => n.slice("model.layers.1.mamba.".length));
    const siso = { ...hybrid(), mamba3Enabled: true };
    expect(modelConfigProblem(siso)).toBeUndefined();
    expect(names(siso)).toEqual(["in_proj.weight", "in_proj.bias", "bc_norm.weight", "lambda_proj.weight", "lambda_proj.bias", "theta_proj.weight", "theta_proj.bias", "b_bias", "c_bias", "dt_bias", "A_log", "D", "norm.weight", "out_proj.weight", "out_proj.bias"]);
    const mimo = { ...siso, mamba3ComplexRope: false, mamba3MimoRank: 3, mamba3UseConv: true };
    expect(names(mimo)).toEqual(["in_proj.weight", "in_proj.bias", "conv1d.weight", "conv1d.bias", "bc_norm.weight", "lambda_proj.weight", "lambda_proj.bias", "mimo_x_up.weight", "mimo_x_up.bias", "b_bias", "c_bias", "dt_bias", "A_log", "D", "mimo_x_down.weight", "mimo_x_down.bias", "norm.weight", "out_proj.weight", "out_proj.bias"]);
    for (const c of [siso, mimo]) {
      const layout = paramLayout(c);
      const g = buildTrainingGraph(c, layout, 2, 8, "none").graph;
      const read = new Set(g.nodes.filter((n) => !n.backward).flatMap((n) => n.inputs).map((t) => g.info(t).name));
      expect(layout.specs.map((s) => s.name).filter((n) => !read.has(n))).toEqual([]);
      const scans = g.nodes.filter((n) => !n.backward && (n.attrs as { kernel?: string }).kernel === "mamba3ScanForward");
      expect(scans.map((n) => n.scope)).toEqual(["model.layers.1"]);
      // MIMO widens each head of 12 three times for the scan.
      expect((scans[0].attrs as { args: { headDim: number } }).args.headDim).toBe(c.mamba3MimoRank ? 36 : 12);
    }
    expect(modelConfigProblem({ ...siso, mamba2StateSize: 7 })).toMatchObject({ field: "mamba2StateSize", message: expect.stringContaining("odd") });
    expect(modelConfigProblem({ ...siso, mamba3ComplexRope: false, mamba2StateSize: 7 })).toBeUndefined();
    expect(modelConfigProblem({ ...siso, mamba3MimoRank: 30 })).toMatchObject({ field: "mamba3MimoRank" });
    expect(modelConfigProblem({ ...siso, mambaLayers: [] })).toMatchObject({ field: "mamba3Enabled" });
  });

  it("builds Mamba2 mixers only in the layers mamba_layers lists, every parameter read, each block under its prefix", () => {
    const c = hybrid();
    expect(modelConfigProblem(c)).toBeUndefined();
    const layout = paramLayout(c);
    const names = layout.specs.map((s) => s.name);
    expect(names.filter((n) => n.includes(".mamba."))).toEqual(
      ["in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias", "A_log", "D", "norm.weight", "out_proj.weight"].map((p) => `model.layers.1.mamba.${p}`),
    );
    expect(names.some((n) => n.startsWith("model.layers.1.self_attn."))).toBe(false);
    expect(names.some((n) => n.startsWith("model.layers.0.self_attn."))).toBe(true);
    const g = buildTrainingGraph(c, layout, 2, 8, "none").graph;
    const read = new Set(g.nodes.filter((n) => !n.backward).flatMap((n) => n.inputs).map((t) => g.info(t).name));
    expect(names.filter((n) => !read.has(n))).toEqual([]);
    expect(g.nodes.filter((n) => !n.backward && (n.attrs as { kernel?: string }).kernel === "ssdScanForward").map((n) => n.scope)).toEqual(["model.layers.1"]);
  });

  it("refuses Mamba2 sizes that do not fit, naming the setting", () => {
    expect(modelConfigProblem({ ...hybrid(), mamba2HeadDim: 10 })).toMatchObject({ field: "mamba2NumHeads", message: expect.stringContaining("hidden_size 24 x mamba2_expand 2 = 48") });
    expect(modelConfigProblem({ ...hybrid(), mambaLayers: [2] })).toMatchObject({ field: "mambaLayers" });
    expect(modelConfigProblem({ ...hybrid(), mambaLayers: [1, 1] })).toMatchObject({ field: "mambaLayers", message: expect.stringContaining("twice") });
    expect(modelConfigProblem({ ...hybrid(), mamba2NGroups: 3 })).toMatchObject({ field: "mamba2NGroups" });
    expect(modelConfigProblem({ ...hybrid(), mamba2ChunkSize: 512 })).toMatchObject({ field: "mamba2ChunkSize" });
    expect(modelConfigProblem({ ...small("gpt2"), mambaLayers: [0] })).toMatchObject({ field: "mambaLayers" });
  });

  it("fills each architecture's defaults", () => {
    expect(small("gpt2")).toMatchObject({ intermediateSize: 96, normEps: 1e-5, tieEmbeddings: true });
    expect(small("llama")).toMatchObject({ intermediateSize: 64, normEps: 1e-6, tieEmbeddings: false });
  });
});
