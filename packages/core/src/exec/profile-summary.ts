import type { ProfiledStep } from "./step-profiler.js";

/** One row of a profile: mean milliseconds per step, its share of the step, GFLOP/s where FLOPs are counted, GB/s of operand bytes. */
export interface ProfileRow {
  name: string;
  ms: number;
  /** ms over the mean step time (the rows of a table sum to 1). */
  share: number;
  /** FLOPs counted by the contract over the row's time; null where none are counted. */
  gflops: number | null;
  /** Operand bytes (kernelCost: what the calls read and write at least) over the row's time, in GB/s; null outside kernels. */
  gbps: number | null;
  /** Kernel rows: calls per step. */
  calls?: number;
}

export interface ProfileSummary {
  /** The numbers of the recorded steps, as the logs show them. */
  steps: number[];
  /** Mean time of a recorded step, from its start to its end inside Trainer.step. */
  stepMs: number;
  /** FLOPs per step the contract counts (matmul, attention) over the step time. */
  gflops: number;
  /**
   * forward, backward, optimizer (time inside their kernel calls), data (waiting
   * for the next batch, copying it to the device) and idle (the rest of the step:
   * the host between kernel calls, reading the loss and the gradient norm back,
   * waiting for other ranks). They sum to stepMs (a little more when device-timed
   * kernels ran while the host was copying the next batch).
   */
  regions: ProfileRow[];
  /** Time inside each kernel, most first, then "outside kernels" (data and idle): they sum to stepMs. */
  kernels: ProfileRow[];
  /** Time inside each kernel by the shape of its calls ("matmul m=8192 n=2304 k=768 transB dtype=bf16"), most first. */
  shapes: ProfileRow[];
}

const REGIONS = ["forward", "backward", "optimizer"] as const;

/** Means per step over the recorded steps. */
export function summarizeProfile(steps: readonly ProfiledStep[]): ProfileSummary {
  if (steps.length === 0) throw new Error("no profiled steps to summarize");
  const n = steps.length;
  let stepMs = 0;
  let dataMs = 0;
  const region = new Map<string, { ms: number; flops: number; bytes: number }>(REGIONS.map((r) => [r, { ms: 0, flops: 0, bytes: 0 }]));
  const kernel = new Map<string, { ms: number; flops: number; bytes: number; calls: number }>();
  const shape = new Map<string, { ms: number; flops: number; bytes: number; calls: number }>();
  const add = (rows: typeof kernel, name: string, ms: number, flops: number, bytes: number) => {
    const row = rows.get(name) ?? { ms: 0, flops: 0, bytes: 0, calls: 0 };
    row.ms += ms;
    row.flops += flops;
    row.bytes += bytes;
    row.calls++;
    rows.set(name, row);
  };
  for (const s of steps) {
    stepMs += s.end - s.start;
    for (const d of s.data) dataMs += d.end - d.start;
    for (const k of s.kernels) {
      const ms = k.end - k.start;
      const r = region.get(k.region)!;
      r.ms += ms;
      r.flops += k.flops;
      r.bytes += k.bytes;
      add(kernel, k.kernel, ms, k.flops, k.bytes);
      add(shape, k.args ? `${k.kernel} ${k.args}` : k.kernel, ms, k.flops, k.bytes);
    }
  }
  const mean = stepMs / n;
  const row = (name: string, totalMs: number, flops: number, bytes: number, calls?: number): ProfileRow => ({
    name,
    ms: totalMs / n,
    share: mean > 0 ? totalMs / n / mean : 0,
    gflops: flops > 0 && totalMs > 0 ? flops / totalMs / 1e6 : null,
    gbps: bytes > 0 && totalMs > 0 ? bytes / totalMs / 1e6 : null,
    ...(calls !== undefined ? { calls: calls / n } : {}),
  });
  const inKernels = REGIONS.reduce((t, r) => t + region.get(r)!.ms, 0);
  // Host-timed kernel calls and data waits never overlap; device-timed kernels can run while
  // the host copies the next batch, so the rest is held at 0 or more.
  const idle = Math.max(0, stepMs - inKernels - dataMs);
  const totalFlops = REGIONS.reduce((t, r) => t + region.get(r)!.flops, 0);
  return {
    steps: steps.map((s) => s.step),
    stepMs: mean,
    gflops: stepMs > 0 ? totalFlops / stepMs / 1e6 : 0,
    regions: [...REGIONS.map((r) => row(r, region.get(r)!.ms, region.get(r)!.flops, region.get(r)!.bytes)), row("data", dataMs, 0, 0), row("idle", idle, 0, 0)],
    kernels: [
      ...[...kernel].sort((a, b) => b[1].ms - a[1].ms).map(([name, k]) => row(name, k.ms, k.flops, k.bytes, k.calls)),
      row("outside kernels", stepMs - inKernels, 0, 0),
    ],
    shapes: [...shape].sort((a, b) => b[1].ms - a[1].ms).map(([name, k]) => row(name, k.ms, k.flops, k.bytes, k.calls)),
  };
}
