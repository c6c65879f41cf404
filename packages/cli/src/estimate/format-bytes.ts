/** Three significant digits, never in exponent notation: 1.50, 12.3, 123, 1023. */
function threeDigits(v: number): string {
  return v >= 999.5 ? v.toFixed(0) : v.toPrecision(3);
}

/** 1536 -> "1.50 KiB"; binary units, three significant digits (below 1 KiB the exact count). */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = bytes;
  let u = 0;
  // Compare the value as it would print, so 1023.9 MiB becomes "1.00 GiB", not "1024 MiB".
  while (u < units.length - 1 && Number(threeDigits(v)) >= 1024) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? String(v) : threeDigits(v)} ${units[u]}`;
}

const COUNT_UNITS: readonly [number, string][] = [
  [1e3, "K"],
  [1e6, "M"],
  [1e9, "B"],
  [1e12, "T"],
];

/** 83_012_345 -> "83.0M"; 999_999 -> "1.00M" (never "1.00e+3K"). */
export function formatCount(n: number): string {
  let i = -1;
  while (i + 1 < COUNT_UNITS.length && n >= COUNT_UNITS[i + 1][0]) i++;
  // 999_999 would print as 1000K: one unit up instead.
  if (i + 1 < COUNT_UNITS.length && Number(threeDigits(n / (i < 0 ? 1 : COUNT_UNITS[i][0]))) >= 1000) i++;
  if (i < 0) return String(n);
  return `${threeDigits(n / COUNT_UNITS[i][0])}${COUNT_UNITS[i][1]}`;
}
