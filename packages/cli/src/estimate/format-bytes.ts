import { formatBytes, threeDigits } from "@kiln/core";

export { formatBytes };

/** `n` in the largest unit it reaches, three significant digits; one unit up where rounding would print 1000. */
function scaled(n: number, units: readonly [number, string][], below: (n: number) => string): string {
  let i = -1;
  while (i + 1 < units.length && n >= units[i + 1][0]) i++;
  if (i + 1 < units.length && Number(threeDigits(n / (i < 0 ? 1 : units[i][0]))) >= 1000) i++;
  return i < 0 ? below(n) : `${threeDigits(n / units[i][0])}${units[i][1]}`;
}

const COUNT_UNITS: readonly [number, string][] = [
  [1e3, "K"],
  [1e6, "M"],
  [1e9, "B"],
  [1e12, "T"],
];

/** 83_012_345 -> "83.0M"; 999_999 -> "1.00M" (never "1.00e+3K"). */
export function formatCount(n: number): string {
  return scaled(n, COUNT_UNITS, String);
}

const FLOP_UNITS: readonly [number, string][] = [
  [1e3, " kFLOP"],
  [1e6, " MFLOP"],
  [1e9, " GFLOP"],
  [1e12, " TFLOP"],
  [1e15, " PFLOP"],
  [1e18, " EFLOP"],
];

/** 1.52e6 -> "1.52 MFLOP"; 4.1e16 -> "41.0 PFLOP". */
export function formatFlops(n: number): string {
  return scaled(n, FLOP_UNITS, (v) => `${Math.round(v)} FLOP`);
}

/** 2.34e-8 -> "23.4 ns", 0.25 -> "250 ms", 12.5 -> "12.5 s"; whole seconds from 1000 s. */
export function formatSeconds(seconds: number): string {
  if (seconds >= 1) return `${threeDigits(seconds)} s`;
  const units: [number, string][] = [
    [1e-3, " ms"],
    [1e-6, " µs"],
    [1e-9, " ns"],
  ];
  for (const [scale, unit] of units) if (Number(threeDigits(seconds / scale)) >= 1 || scale === 1e-9) return `${threeDigits(seconds / scale)}${unit}`;
  return `${seconds} s`;
}
