import { describe, expect, it } from "vitest";
import { checkConformance } from "@kiln/contract/conformance";
import { clobbersInterleavedGradients, dropsLastRow, forgetsToAccumulate, modifiesInput, withKernels, writesPastEnd } from "./fixtures/broken-backends.js";

const only = (kernel: string) => ({ filter: (c: { kernel: string }) => c.kernel === kernel, dtypes: ["f32", "bf16"] as const });

describe("the conformance suite catches broken backends", () => {
  it("fails matmul that drops the last row, on every shape", async () => {
    const outcomes = await checkConformance(dropsLastRow(), only("matmul"));
    expect(outcomes.length).toBeGreaterThan(10);
    for (const o of outcomes) {
      expect(o.status, o.name).toBe("failed");
      expect(o.details.join(), o.name).toMatch(/^c: \d+ of \d+ elements off/);
    }
  });

  it("passes the same reference backend unbroken", async () => {
    const outcomes = await checkConformance(withKernels(() => ({})), only("matmul"));
    for (const o of outcomes) expect(o.status, `${o.name}: ${o.details}`).toBe("passed");
  });

  it("reports bytes written past the end of an output", async () => {
    const outcomes = await checkConformance(writesPastEnd(), { ...only("layerNormForward"), dtypes: ["f32"] });
    const failed = outcomes.filter((o) => o.status === "failed" && !o.case.inPlace);
    expect(failed.length).toBeGreaterThan(0);
    expect(failed[0].details.join()).toMatch(/outside the operand was written/);
  });

  it("reports a modified input", async () => {
    const outcomes = await checkConformance(modifiesInput(), { ...only("geluForward"), dtypes: ["f32"] });
    const notInPlace = outcomes.filter((o) => !o.case.inPlace);
    for (const o of notInPlace) expect(o.details.join(), o.name).toMatch(/input was modified/);
  });

  it("reports a parameter gradient that does not accumulate", async () => {
    const outcomes = await checkConformance(forgetsToAccumulate(), { ...only("embeddingBackward"), dtypes: ["f32"] });
    for (const o of outcomes) expect(o.status, o.name).toBe("failed");
  });

  it("reports gradients that overwrite their neighbours in one packed buffer", async () => {
    const outcomes = await checkConformance(clobbersInterleavedGradients(), { ...only("attentionBackward"), dtypes: ["f32"] });
    const packed = outcomes.filter((o) => o.case.shared !== undefined);
    expect(packed.map((o) => o.case.label)).toEqual([
      expect.stringMatching(/packed qkv/),
      expect.stringMatching(/packed kv/),
      expect.stringMatching(/packed qkv buffer, sliding window/),
      expect.stringMatching(/documents, one packed qkv buffer/),
    ]);
    for (const o of packed) {
      expect(o.status, o.name).toBe("failed");
      expect(o.details.join(), o.name).toMatch(/^(dQ\+dK\+dV|dK\+dV): \d+ of \d+ elements off/);
    }
    for (const o of outcomes.filter((x) => x.case.shared === undefined)) expect(o.status, o.name).toBe("passed");
  });

  it("skips, with the reason, kernels a backend declares unsupported", async () => {
    const backend = dropsLastRow();
    const caps = backend.capabilities();
    const limited = { ...backend, capabilities: () => ({ ...caps, kernelDTypes: { ...caps.kernelDTypes, matmul: ["f32"] as const } }) };
    const outcomes = await checkConformance(limited, only("matmul"));
    const bf16 = outcomes.filter((o) => o.case.dtype === "bf16");
    expect(bf16.length).toBeGreaterThan(0);
    for (const o of bf16) {
      expect(o.status).toBe("skipped");
      expect(o.details[0]).toBe("broken declares no bf16 for matmul");
    }
  });
});
