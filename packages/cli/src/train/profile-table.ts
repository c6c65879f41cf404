import type { ProfileRow, ProfileSummary } from "@kiln/core";

/** What the table says about how its figures were taken. */
export interface ProfileTableContext {
  /** Mean wall time of trainer.step() over the same steps, measured by the caller around the call. */
  measuredStepMs: number;
  device: string;
  /** The backend waited for the device after each kernel (an asynchronous backend without a timer). */
  synchronized: boolean;
  /** Kernel times are the device's own (two timestamps around each call, nothing waited for). */
  deviceTimed?: boolean;
}

/** Calls by shape the table lists (profile.json has them all). */
const SHAPE_ROWS = 15;

const fixed = (v: number, digits: number) => (Number.isFinite(v) ? v.toFixed(digits) : "-");

function rows(title: string, list: readonly ProfileRow[], withCalls: boolean): string[] {
  const head = [title.padEnd(22), "ms/step".padStart(9), "share".padStart(7), "GFLOP/s".padStart(9), "GB/s".padStart(8), ...(withCalls ? ["calls/step".padStart(11)] : [])].join(" ");
  const body = list.map((r) =>
    [
      r.name.padEnd(22),
      fixed(r.ms, 2).padStart(9),
      `${fixed(100 * r.share, 1)}%`.padStart(7),
      (r.gflops === null ? "-" : fixed(r.gflops, 1)).padStart(9),
      (r.gbps === null ? "-" : fixed(r.gbps, 1)).padStart(8),
      ...(withCalls ? [(r.calls === undefined ? "" : fixed(r.calls, 0)).padStart(11)] : []),
    ].join(" "),
  );
  const total = list.reduce((t, r) => t + r.ms, 0);
  return [head, ...body, `${"total".padEnd(22)} ${fixed(total, 2).padStart(9)}`];
}

/** Calls by shape: the figures first, the shape last (shapes are long). */
function shapeRows(list: readonly ProfileRow[]): string[] {
  const head = ["ms/step".padStart(9), "share".padStart(7), "GFLOP/s".padStart(9), "GB/s".padStart(8), "calls/step".padStart(11), "  call"].join(" ");
  const body = list.map((r) =>
    [
      fixed(r.ms, 2).padStart(9),
      `${fixed(100 * r.share, 1)}%`.padStart(7),
      (r.gflops === null ? "-" : fixed(r.gflops, 1)).padStart(9),
      (r.gbps === null ? "-" : fixed(r.gbps, 1)).padStart(8),
      (r.calls === undefined ? "" : fixed(r.calls, 0)).padStart(11),
      `  ${r.name}`,
    ].join(" "),
  );
  return [head, ...body];
}

/** The profile as text: the regions, then each kernel, each table summing to the step time. */
export function formatProfileTable(s: ProfileSummary, c: ProfileTableContext): string {
  const first = s.steps[0];
  const last = s.steps.at(-1)!;
  const sum = s.regions.reduce((t, r) => t + r.ms, 0);
  const lines = [
    `profile of step${s.steps.length === 1 ? ` ${first}` : `s ${first}-${last}`} (${s.steps.length} step${s.steps.length === 1 ? "" : "s"}, means per step) on ${c.device}`,
    `step ${fixed(s.stepMs, 2)} ms inside the trainer, ${fixed(c.measuredStepMs, 2)} ms measured around each step: the table sums to ${fixed((100 * sum) / c.measuredStepMs, 1)}% of it; ${fixed(s.gflops, 1)} GFLOP/s counted (matmul, attention)`,
    "GB/s: the bytes each call's operands hold (inputs read once, outputs written once) over its time: the least it moves",
    ...(c.synchronized ? ["measured with a device synchronize after every kernel: kernel times are run times, and the steps ran slower than unprofiled ones"] : []),
    ...(c.deviceTimed ? ["kernel times from the device's timestamps around each call (nothing waited for between calls): run times as the device ran them; idle includes the device waiting for the host"] : []),
    "",
    ...rows("region", s.regions, false),
    "",
    ...rows("kernel", s.kernels, true),
    "",
    `the ${Math.min(SHAPE_ROWS, s.shapes.length)} costliest call shapes (all of them in profile.json):`,
    ...shapeRows(s.shapes.slice(0, SHAPE_ROWS)),
  ];
  return lines.join("\n");
}
