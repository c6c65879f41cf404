import { describe, expect, it } from "vitest";
import { KernelArgumentError } from "../src/errors.js";
import { attentionBackwardSpec, attentionForwardSpec, attentionLayout, attentionPairs, firstKey } from "../src/kernels/attention.js";

// The defaults and checks of the attention layout, vHeadDim (MLA) included.

const base = { batch: 2, seqLen: 5, heads: 4, kvHeads: 2, headDim: 8, dtype: "f32" as const };

describe("attentionLayout", () => {
  it("defaults to dense rows, vHeadDim = headDim and scale 1/sqrt(headDim)", () => {
    const l = attentionLayout(base);
    expect(l).toMatchObject({ vHeadDim: 8, qRowStride: 32, kvRowStride: 16, vRowStride: 16, outRowStride: 32, group: 2 });
    expect(l.scale).toBeCloseTo(1 / Math.sqrt(8), 15);
  });

  it("keeps v at k's row stride when vHeadDim equals headDim (packed qkv)", () => {
    expect(attentionLayout({ ...base, kvRowStride: 64 }).vRowStride).toBe(64);
    expect(attentionLayout({ ...base, vHeadDim: 8, kvRowStride: 64 }).vRowStride).toBe(64);
  });

  it("gives v dense rows of vHeadDim when it differs, out rows of heads*vHeadDim, and scale from headDim", () => {
    const l = attentionLayout({ ...base, vHeadDim: 6, kvRowStride: 64 });
    expect(l).toMatchObject({ vHeadDim: 6, kvRowStride: 64, vRowStride: 12, outRowStride: 24 });
    expect(l.scale).toBeCloseTo(1 / Math.sqrt(8), 15);
    expect(attentionLayout({ ...base, vHeadDim: 6, vRowStride: 40, outRowStride: 30 })).toMatchObject({ vRowStride: 40, outRowStride: 30 });
  });
});

describe("sliding window", () => {
  it("caps the window at seqLen and defaults it to seqLen", () => {
    expect(attentionLayout(base).window).toBe(5);
    expect(attentionLayout({ ...base, window: 3 }).window).toBe(3);
    expect(attentionLayout({ ...base, window: 99 }).window).toBe(5);
  });

  it("starts query t's keys at max(0, t - window + 1)", () => {
    expect([0, 1, 2, 3, 4].map((t) => firstKey(t, 2))).toEqual([0, 0, 1, 2, 3]);
    expect(firstKey(4, 1)).toBe(4);
  });

  it("counts the pairs the window keeps: 1..W keys for the first W queries, W for the rest", () => {
    // T = 5, W = 2: 1 + 2 + 2 + 2 + 2 = 9 pairs per head; 2 batches x 4 heads.
    expect(attentionPairs({ ...base, window: 2 })).toBe(8 * 9);
    expect(attentionPairs(base)).toBe(8 * 15);
    expect(attentionPairs({ ...base, window: 1 })).toBe(8 * 5);
    expect(attentionForwardSpec.flops!({ ...base, window: 2 } as never)).toBe(2 * 8 * 9 * 16);
  });

  it("refuses a window that is not a positive integer", () => {
    for (const window of [0, -3, 2.5]) expect(() => attentionForwardSpec.check({ ...base, window } as never)).toThrow(/window must be a positive integer/);
  });
});

describe("attention operands and checks with vHeadDim", () => {
  const elements = (spec: typeof attentionBackwardSpec, a: Parameters<typeof attentionLayout>[0]) =>
    Object.fromEntries(spec.operands(a as never).map((o) => [o.key, o.elements]));

  it("sizes k and dK by headDim, v, dV, out, dOut by vHeadDim", () => {
    // rows = 10; k: 2*8 wide at stride 20; v: 2*12 wide at stride 30; out: 4*12 dense
    const e = elements(attentionBackwardSpec, { ...base, vHeadDim: 12, kvRowStride: 20, vRowStride: 30 });
    expect(e).toMatchObject({ q: 320, k: 9 * 20 + 16, dK: 9 * 20 + 16, v: 9 * 30 + 24, dV: 9 * 30 + 24, out: 480, dOut: 480, lse: 40 });
  });

  it("counts q.k over headDim and p.v over vHeadDim", () => {
    const pairs = 2 * 4 * 15;
    expect(attentionForwardSpec.flops!({ ...base, vHeadDim: 12 } as never)).toBe(2 * pairs * (8 + 12));
    expect(attentionBackwardSpec.flops!({ ...base, vHeadDim: 12 } as never)).toBe(2 * pairs * (3 * 8 + 2 * 12));
    expect(attentionBackwardSpec.flops!(base as never)).toBe(2.5 * attentionForwardSpec.flops!(base as never));
  });

  it.each([
    [{ vHeadDim: 0 }, /vHeadDim must be a positive integer/],
    [{ vHeadDim: 2.5 }, /vHeadDim must be a positive integer/],
    [{ vHeadDim: 12, vRowStride: 20 }, /vRowStride \(20\) must be >= kvHeads\*vHeadDim \(24\)/],
    [{ vHeadDim: 12, outRowStride: 40 }, /outRowStride \(40\) must be >= heads\*vHeadDim \(48\)/],
    [{ vHeadDim: 12, kvRowStride: 12 }, /kvRowStride \(12\) must be >= kvHeads\*headDim \(16\)/],
    // vHeadDim equal to headDim: v takes k's stride, which must hold v's rows too
    [{ vHeadDim: 4, kvRowStride: 16, qRowStride: 31 }, /qRowStride \(31\) must be >= heads\*headDim \(32\)/],
  ])("rejects %o", (extra, message) => {
    expect(() => attentionForwardSpec.check({ ...base, ...extra } as never)).toThrow(KernelArgumentError);
    expect(() => attentionBackwardSpec.check({ ...base, ...extra } as never)).toThrow(message);
  });
});
