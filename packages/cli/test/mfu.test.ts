import type { Capabilities } from "@kiln/contract";
import { describe, expect, it } from "vitest";
import { modelFlopsUtilization, peakForDtype } from "../src/train/mfu.js";

describe("modelFlopsUtilization", () => {
  it("is model FLOPs / (seconds x peak)", () => {
    // 1e12 model FLOPs in 2 s on a 1e12 FLOP/s device: half the peak.
    expect(modelFlopsUtilization(1e12, 2, 1e12)).toEqual({ mfu: 0.5, beatPeak: false });
    expect(modelFlopsUtilization(3e9, 0.1, 60e9).mfu).toBeCloseTo(0.5, 12);
  });

  it("gives the same figure for the same work whatever the window length", () => {
    const tokensPerSecond = 4321;
    const flopsPerToken = 6 * 83e6;
    const figures = [0.5, 1, 7.25, 60].map((seconds) => modelFlopsUtilization(tokensPerSecond * seconds * flopsPerToken, seconds, 100e9).mfu);
    for (const f of figures) expect(f).toBeCloseTo(figures[0]!, 12);
  });

  it("never goes above 1: a faster window means the peak figure is wrong, and says so", () => {
    expect(modelFlopsUtilization(2e12, 1, 1e12)).toEqual({ mfu: 1, beatPeak: true });
    expect(modelFlopsUtilization(1e12, 1, 1e12)).toEqual({ mfu: 1, beatPeak: false });
  });

  it("is null without a peak or a measurable window, and never negative", () => {
    expect(modelFlopsUtilization(1e12, 1, undefined).mfu).toBeNull();
    expect(modelFlopsUtilization(1e12, 1, 0).mfu).toBeNull();
    expect(modelFlopsUtilization(1e12, 0, 1e12).mfu).toBeNull();
    expect(modelFlopsUtilization(0, 1, 1e12).mfu).toBe(0);
  });
});

describe("peakForDtype", () => {
  const caps = (kind: "cpu" | "gpu", peakFlops: Capabilities["peakFlops"]) => ({ device: { name: "x", kind, memoryBytes: 1 }, kernelDTypes: {}, peakFlops }) as unknown as Capabilities;

  it("takes the GPU's figure for the dtype trained in", () => {
    const h100 = caps("gpu", { f32: 67e12, bf16: 989e12, f16: 989e12 });
    expect(peakForDtype(h100, "f32")).toBe(67e12);
    expect(peakForDtype(h100, "bf16")).toBe(989e12);
  });

  it("has none for a dtype the GPU has no peak for (bf16 on a T4)", () => {
    expect(peakForDtype(caps("gpu", { f32: 8.1e12, f16: 65e12 }), "bf16")).toBeUndefined();
  });

  it("uses the CPU's f32 peak for every dtype (the CPU kernels compute in f32)", () => {
    expect(peakForDtype(caps("cpu", { f32: 60e9 }), "bf16")).toBe(60e9);
  });
});
