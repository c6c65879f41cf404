/** Three significant digits, never in exponent notation. */
function threeDigits(v: number): string {
  return v >= 999.5 ? v.toFixed(0) : v.toPrecision(3);
}

/** 1536 -> "1.50 KiB": binary units and three significant digits, as the CLI prints sizes. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = bytes;
  let u = 0;
  while (u < units.length - 1 && Number(threeDigits(v)) >= 1024) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? String(v) : threeDigits(v)} ${units[u]}`;
}
