import type { KernelRoofline } from "./estimate.js";
import { formatSeconds } from "./format-bytes.js";

/**
 * The roofline step kernel by kernel as a table: calls a step, GB moved, GFLOP, the least
 * time (the longer of FLOPs at peak and bytes at the bandwidth, call by call), its share
 * of the roofline step, and whether FLOPs or bytes set it.
 */
export function formatKernelRooflines(rows: readonly KernelRoofline[], stepSeconds: number): string {
  const header = ["kernel", "calls", "GB", "GFLOP", "least time", "share", "bound"];
  const body = rows.map((r) => [
    r.kernel,
    String(r.calls),
    (r.bytes / 1e9).toFixed(2),
    (r.flops / 1e9).toFixed(1),
    formatSeconds(r.seconds),
    `${((100 * r.seconds) / stepSeconds).toFixed(1)}%`,
    r.bound,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  // Names and the bound to the left, figures to the right.
  const line = (cells: string[]) => `  ${cells.map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ").trimEnd()}`;
  return `${[line(header), ...body.map(line)].join("\n")}\n`;
}
