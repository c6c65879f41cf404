/** Three significant digits, never in exponent notation: 1.50, 12.3, 123, 1023. */
export function threeDigits(v: number): string {
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
