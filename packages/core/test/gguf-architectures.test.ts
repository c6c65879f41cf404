import { describe, expect, it } from "vitest";
import { ARCH_NAMES, type Arch, resolveModelConfig } from "../src/model/architectures.js";
import { paramLayout } from "../src/model/param-layout.js";
import { elementCount } from "../src/graph/tensor.js";
import { ggufModelOf } from "../src/gguf/gguf-architectures.js";
import { fromGguf, ggufShape, interleaveRopeRows, toGguf } from "../src/gguf/gguf-tensor-map.js";

const small = (arch: Arch) =>
  resolveModelConfig({
    arch,
    vocabSize: 37,
    hiddenSize: 24,
    numLayers: 2,
    numHeads: 4,
    kvHeads: arch === "gpt2" ? 4 : 2,
    maxSeqLen: 16,
    tieEmbeddings: false,
    ...(arch === "gemma3" ? { slidingWindow: 4, layerTypes: ["sliding_attention", "full_attention"] as const } : {}),
  });

describe("the GGUF tensor mapping of each architecture", () => {
  it.each(ARCH_NAMES)("%s: every parameter goes to one GGUF tensor of its element count and comes back unchanged", (arch) => {
    const m = small(arch);
    const g = ggufModelOf(m, "test");
    const specs = paramLayout(m).specs;
    expect(g.tensors.map((r) => r.kiln).sort()).toEqual(specs.map((s) => s.name).sort());
    expect(new Set(g.tensors.map((r) => r.gguf)).size).toBe(g.tensors.length);
    for (const r of g.tensors) {
      const spec = specs.find((s) => s.name === r.kiln)!;
      expect(r.shape).toEqual(spec.shape);
      expect(elementCount(ggufShape(r))).toBe(elementCount(spec.shape));
      const w = Float32Array.from({ length: elementCount(spec.shape) }, (_, i) => Math.sin(i + 1));
      const back = fromGguf(r, toGguf(r, w));
      for (let i = 0; i < w.length; i++) expect(back[i]).toBeCloseTo(w[i], 6);
    }
  });

  it("writes a kiln mixture of experts as llama.cpp's llama with Mixtral's expert tensors (ne reversed: a row, then the expert's rows, then the experts)", () => {
    const m = { ...small("llama"), numExperts: 4, expertsPerToken: 2 };
    const g = ggufModelOf(m, "test");
    expect(g.metadata.filter(([k]) => k.startsWith("llama.expert"))).toEqual([["llama.expert_count", { type: "u32", value: 4 }], ["llama.expert_used_count", { type: "u32", value: 2 }]]);
    const rule = (name: string) => g.tensors.find((r) => r.gguf === name)!;
    expect(ggufShape(rule("blk.0.ffn_gate_exps.weight"))).toEqual([24, m.intermediateSize, 4]);
    expect(ggufShape(rule("blk.0.ffn_down_exps.weight"))).toEqual([m.intermediateSize, 24, 4]);
    expect(ggufShape(rule("blk.1.ffn_gate_inp.weight"))).toEqual([24, 4]);
    expect(g.tensors.some((r) => r.gguf === "blk.0.ffn_gate.weight")).toBe(false);
  });

  it("names llama.cpp's architectures: Mistral as llama (RoPE rows interleaved), Qwen and Gemma rows copied", () => {
    const archOf = (a: Arch) => ggufModelOf(small(a), "test");
    expect(ARCH_NAMES.map((a) => [a, archOf(a).arch])).toEqual([["gpt2", "gpt2"], ["llama", "llama"], ["qwen2", "qwen2"], ["qwen3", "qwen3"], ["mistral", "llama"], ["gemma3", "gemma3"]]);
    const q = (a: Arch) => archOf(a).tensors.find((r) => r.gguf === "blk.0.attn_q.weight")!.transform;
    expect([q("llama"), q("mistral"), q("qwen2"), q("gemma3")]).toEqual([{ kind: "ropeRows", heads: 4 }, { kind: "ropeRows", heads: 4 }, { kind: "copy" }, { kind: "copy" }]);
    expect(archOf("gpt2").tensors.find((r) => r.gguf === "blk.0.attn_qkv.weight")).toMatchObject({ shape: [24, 72], transform: { kind: "transpose" } });
    expect(ggufShape(archOf("gpt2").tensors.find((r) => r.gguf === "blk.0.attn_qkv.weight")!)).toEqual([24, 72]);
    expect(archOf("gemma3").tensors.find((r) => r.gguf === "blk.1.post_ffw_norm.weight")!.transform).toEqual({ kind: "plusOne" });
  });

  it("moves a transposed matrix's rows to outputs, and a head's rotated halves next to each other", () => {
    const r = { gguf: "x", kiln: "x", shape: [2, 3], transform: { kind: "transpose" as const }, keepF32: false };
    expect([...toGguf(r, Float32Array.of(1, 2, 3, 4, 5, 6))]).toEqual([1, 4, 2, 5, 3, 6]);
    // One head of 4 rows (one column): rows (0, 1 | 2, 3) pair as (0, 2) and (1, 3).
    expect([...interleaveRopeRows(Float32Array.of(0, 1, 2, 3), 1, 1)]).toEqual([0, 2, 1, 3]);
    expect([...interleaveRopeRows(Float32Array.of(0, 2, 1, 3), 1, 1, true)]).toEqual([0, 1, 2, 3]);
  });

  it("gives a model with a shorter sliding window than its context the window as its llama.cpp context, and says so", () => {
    const m = { ...small("mistral"), slidingWindow: 8 };
    const g = ggufModelOf(m, "test");
    expect(g.metadata.find(([k]) => k === "llama.context_length")?.[1]).toEqual({ type: "u32", value: 8 });
    expect(g.notes.join(" ")).toMatch(/full attention.*sliding window \(8 tokens\)/);
    expect(ggufModelOf(small("mistral"), "test").notes).toEqual([]);
  });

  it("refuses what llama.cpp or kiln's writer does not map, naming it", () => {
    expect(() => ggufModelOf({ ...small("llama"), numExperts: 4, expertsPerToken: 2, sharedExpert: true }, "ck")).toThrow(/llama.cpp's llama architecture has no ungated shared expert/);
    expect(() => ggufModelOf({ ...small("qwen3"), numExperts: 4, expertsPerToken: 2 }, "ck")).toThrow(/qwen3 architecture has no mixture-of-experts MLP/);
    expect(() => ggufModelOf({ ...small("llama"), mambaLayers: [1] }, "ck")).toThrow(/kiln does not write Mamba layers as GGUF yet/);
    expect(() => ggufModelOf({ ...small("llama"), kvLatentDim: 8 }, "ck")).toThrow(/multi-head latent attention/);
    expect(() => ggufModelOf({ ...small("qwen2"), mlpBias: true }, "ck")).toThrow(/llama.cpp's qwen2 architecture has no MLP biases/);
    expect(() => ggufModelOf({ ...small("qwen3"), ropeScaling: { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8 } }, "ck")).toThrow(/no Llama 3 RoPE scaling/);
    expect(() => ggufModelOf({ ...small("gemma3"), queryPreAttnScalar: 12 }, "ck")).toThrow(/scales queries by 1\/sqrt\(6\)/);
  });
});
