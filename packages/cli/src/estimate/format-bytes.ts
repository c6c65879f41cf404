/** 1536 -> "1.5 KiB"; binary units, three significant digits. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toPrecision(3)} ${units[u]}`;
}

/** 83_012_345 -> "83.0M". */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toPrecision(3)}B`;
  if (n >= 1e6) return `${(n / 1e6).toPrecision(3)}M`;
  if (n >= 1e3) return `${(n / 1e3).toPrecision(3)}K`;
  return String(n);
}
