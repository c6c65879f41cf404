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
  /** The device's peak FLOP/s for the training dtype and its memory bandwidth (bytes/s), where known: the floor column. */
  peakFlops?: number;
  memoryBandwidth?: number;
}

/**
 * A row's time at its roofline over its time: the longer of its FLOPs at peak and its
 * operand bytes at the memory bandwidth, as a share of what it took (100%: at the floor).
 */
function floorShare(r: ProfileRow, c: ProfileTableContext): string {
  if (!c.peakFlops || !c.memoryBandwidth || (r.gflops === null && r.gbps === null)) return "-";
  const share = Math.max(((r.gflops ?? 0) * 1e9) / c.peakFlops, ((r.gbps ?? 0) * 1e9) / c.memoryBandwidth);
  return `${fixed(100 * share, 1)}%`;
}

/** Calls by shape the table lists (profile.json has them all). */
const SHAPE_ROWS = 15;

const fixed = (v: number, digits: number) => (Number.isFinite(v) ? v.toFixed(digits) : "-");

function rows(title: string, list: readonly ProfileRow[], withCalls: boolean, c: ProfileTableContext): string[] {
  const floor = withCalls && c.peakFlops !== undefined && c.memoryBandwidth !== undefined;
  const head = [title.padEnd(22), "ms/step".padStart(9), "share".padStart(7), "GFLOP/s".padStart(9), "GB/s".padStart(8), ...(withCalls ? ["calls/step".padStart(11)] : []), ...(floor ? ["floor".padStart(7)] : [])].join(" ");
  const body = list.map((r) =>
    [
      r.name.padEnd(22),
      fixed(r.ms, 2).padStart(9),
      `${fixed(100 * r.share, 1)}%`.padStart(7),
      (r.gflops === null ? "-" : fixed(r.gflops, 1)).padStart(9),
      (r.gbps === null ? "-" : fixed(r.gbps, 1)).padStart(8),
      ...(withCalls ? [(r.calls === undefined ? "" : fixed(r.calls, 0)).padStart(11)] : []),
      ...(floor ? [floorShare(r, c).padStart(7)] : []),
    ].join(" "),
  );
  const total = list.reduce((t, r) => t + r.ms, 0);
  return [head, ...body, `${"total".padEnd(22)} ${fixed(total, 2).padStart(9)}`];
}

/** Calls by shape: the figures first, the shape last (shapes are long). */
function shapeRows(list: readonly ProfileRow[], c: ProfileTableContext): string[] {
  const floor = c.peakFlops !== undefined && c.memoryBandwidth !== undefined;
  const head = ["ms/step".padStart(9), "share".padStart(7), "GFLOP/s".padStart(9), "GB/s".padStart(8), "calls/step".padStart(11), ...(floor ? ["floor".padStart(7)] : []), "  call"].join(" ");
  const body = list.map((r) =>
    [
      fixed(r.ms, 2).padStart(9),
      `${fixed(100 * r.share, 1)}%`.padStart(7),
      (r.gflops === null ? "-" : fixed(r.gflops, 1)).padStart(9),
      (r.gbps === null ? "-" : fixed(r.gbps, 1)).padStart(8),
      (r.calls === undefined ? "" : fixed(r.calls, 0)).padStart(11),
      ...(floor ? [floorShare(r, c).padStart(7)] : []),
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
    ...(c.peakFlops !== undefined && c.memoryBandwidth !== undefined
      ? [`floor: the calls' roofline time (FLOPs at ${fixed(c.peakFlops / 1e12, 0)} TFLOP/s, operand bytes at ${fixed(c.memoryBandwidth / 1e9, 0)} GB/s, the longer) over their time`]
      : []),
    "",
    ...rows("region", s.regions, false, c),
    "",
    ...rows("kernel", s.kernels, true, c),
    "",
    `the ${Math.min(SHAPE_ROWS, s.shapes.length)} costliest call shapes (all of them in profile.json):`,
    ...shapeRows(s.shapes.slice(0, SHAPE_ROWS), c),
  ];
  return lines.join("\n");
}
