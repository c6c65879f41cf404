import type { Backend } from "../backend.js";
import { ALL_DTYPES } from "../dtype.js";
import { KERNEL_NAMES } from "../kernels/index.js";

/** A markdown table: one row per kernel, one column per dtype, ✓ where the backend declares support. */
export function supportMatrix(backend: Backend): string {
  const caps = backend.capabilities().kernelDTypes;
  const cols = ALL_DTYPES.filter((t) => KERNEL_NAMES.some((k) => caps[k]?.includes(t)));
  const lines = [`| kernel | ${cols.join(" | ")} |`, `|---|${cols.map(() => ":-:").join("|")}|`];
  for (const k of KERNEL_NAMES) lines.push(`| ${k} | ${cols.map((t) => (caps[k]?.includes(t) ? "✓" : "—")).join(" | ")} |`);
  return lines.join("\n");
}
