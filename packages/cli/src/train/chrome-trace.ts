import type { ProfiledStep } from "@kiln/core";

/** One event of the Trace Event Format (chrome://tracing, Perfetto): "X" complete events and "M" metadata. */
export interface TraceEvent {
  name: string;
  ph: "X" | "M";
  pid: number;
  tid: number;
  /** Microseconds from the first recorded step. */
  ts: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

export interface ChromeTrace {
  traceEvents: TraceEvent[];
  displayTimeUnit: "ms";
}

/**
 * The recorded steps as a trace: one complete event per step, inside it one per
 * stretch of kernels of one region (forward, backward, optimizer) and per data
 * wait, and inside each stretch one per kernel call. All run on the main
 * thread. Times go through whole nanoseconds, so a parent's end is exactly its
 * last child's end and events nest without rounding overlaps.
 */
export function chromeTrace(steps: readonly ProfiledStep[], pid = 1): ChromeTrace {
  const tid = 1;
  const origin = steps[0]?.start ?? 0;
  const ns = (ms: number) => Math.round((ms - origin) * 1e6);
  const complete = (name: string, cat: string, startNs: number, endNs: number, args?: Record<string, unknown>): TraceEvent => ({
    name,
    cat,
    ph: "X",
    pid,
    tid,
    ts: startNs / 1000,
    dur: (endNs - startNs) / 1000,
    ...(args ? { args } : {}),
  });
  const events: TraceEvent[] = [
    { name: "process_name", ph: "M", pid, tid, ts: 0, args: { name: "kiln train" } },
    { name: "thread_name", ph: "M", pid, tid, ts: 0, args: { name: "trainer" } },
  ];
  for (const s of steps) {
    events.push(complete(`step ${s.step}`, "step", ns(s.start), ns(s.end)));
    const timeline = [...s.kernels.map((k) => ({ kind: "kernel" as const, k })), ...s.data.map((d) => ({ kind: "data" as const, d }))].sort(
      (a, b) => (a.kind === "kernel" ? a.k.start : a.d.start) - (b.kind === "kernel" ? b.k.start : b.d.start),
    );
    let stretch: TraceEvent[] = [];
    let region = "";
    let stretchStartNs = 0;
    let stretchEndNs = 0;
    const close = () => {
      if (stretch.length === 0) return;
      events.push(complete(region, "region", stretchStartNs, stretchEndNs, { kernels: stretch.length }), ...stretch);
      stretch = [];
    };
    for (const e of timeline) {
      if (e.kind === "data") {
        close();
        events.push(complete(e.d.name, "data", ns(e.d.start), ns(e.d.end)));
        continue;
      }
      if (e.k.region !== region) close();
      region = e.k.region;
      const [startNs, endNs] = [ns(e.k.start), ns(e.k.end)];
      if (stretch.length === 0) stretchStartNs = startNs;
      stretchEndNs = endNs;
      stretch.push(complete(e.k.kernel, e.k.region, startNs, endNs, { ...(e.k.args ? { call: e.k.args } : {}), ...(e.k.flops > 0 ? { flops: e.k.flops } : {}), bytes: e.k.bytes }));
    }
    close();
  }
  return { traceEvents: events, displayTimeUnit: "ms" };
}
