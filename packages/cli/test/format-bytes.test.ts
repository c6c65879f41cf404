import { describe, expect, it } from "vitest";
import { formatBytes, formatCount, formatFlops, formatSeconds } from "../src/estimate/format-bytes.js";

describe("formatBytes", () => {
  it("prints three significant digits in binary units, never in exponent notation", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.50 KiB");
    expect(formatBytes(1010 * 2 ** 20)).toBe("1010 MiB");
    expect(formatBytes(24 * 2 ** 30)).toBe("24.0 GiB");
    expect(formatBytes(123.4 * 2 ** 20)).toBe("123 MiB");
  });

  it("moves up a unit when rounding reaches 1024", () => {
    expect(formatBytes(1023.9 * 2 ** 20)).toBe("1.00 GiB");
    expect(formatBytes(1023.4 * 2 ** 20)).toBe("1023 MiB");
  });

  it("has no exponent anywhere from 1 B to 1 PiB", () => {
    for (let b = 1; b < 2 ** 50; b = Math.ceil(b * 1.37)) expect(formatBytes(b)).not.toMatch(/e/);
  });
});

describe("formatCount", () => {
  it("uses K, M, B with three significant digits", () => {
    expect(formatCount(999)).toBe("999");
    expect(formatCount(83_012_345)).toBe("83.0M");
    expect(formatCount(124_439_808)).toBe("124M");
    expect(formatCount(1_500_000_000)).toBe("1.50B");
  });

  it("moves up a unit instead of printing 1000 of one", () => {
    expect(formatCount(999_999)).toBe("1.00M");
    expect(formatCount(999_600)).toBe("1.00M");
    expect(formatCount(999_400)).toBe("999K");
  });
});

describe("formatFlops and formatSeconds", () => {
  it("print FLOPs with SI prefixes, three significant digits", () => {
    expect(formatFlops(512)).toBe("512 FLOP");
    expect(formatFlops(1.52e6)).toBe("1.52 MFLOP");
    expect(formatFlops(999.9e9)).toBe("1.00 TFLOP");
    expect(formatFlops(4.1e16)).toBe("41.0 PFLOP");
  });

  it("print durations from nanoseconds to seconds, never in exponent notation", () => {
    expect(formatSeconds(12.5)).toBe("12.5 s");
    expect(formatSeconds(0.25)).toBe("250 ms");
    expect(formatSeconds(0.0009996)).toBe("1.00 ms");
    expect(formatSeconds(2.34e-8)).toBe("23.4 ns");
    for (let t = 1e-10; t < 1e5; t *= 3.1) expect(formatSeconds(t)).not.toMatch(/e/);
  });
});
