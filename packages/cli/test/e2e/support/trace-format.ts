// Checks a Chrome trace (the Trace Event Format's JSON object form) the way a
// viewer reads it: a traceEvents array; every event has ph, name, pid and tid,
// and ts where its phase needs one; complete ("X") events have a dur >= 0 and,
// on each thread, nest: an event that starts inside another ends inside it too.

const PHASES = new Set(["X", "B", "E", "i", "I", "M", "C", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"]);

/** Problems found, empty for a valid trace. */
export function traceProblems(trace: unknown): string[] {
  const problems: string[] = [];
  if (typeof trace !== "object" || trace === null || !Array.isArray((trace as { traceEvents?: unknown }).traceEvents)) return ["no traceEvents array"];
  const events = (trace as { traceEvents: Record<string, unknown>[] }).traceEvents;
  const complete = new Map<string, { name: string; start: number; end: number }[]>();
  events.forEach((e, i) => {
    const at = `event ${i} (${String(e.name)})`;
    if (typeof e.ph !== "string" || !PHASES.has(e.ph)) problems.push(`${at}: ph ${JSON.stringify(e.ph)} is not a phase`);
    if (typeof e.name !== "string" || e.name === "") problems.push(`${at}: no name`);
    for (const key of ["pid", "tid"]) if (!Number.isInteger(e[key])) problems.push(`${at}: ${key} is not an integer`);
    if (e.ph !== "M" && !(typeof e.ts === "number" && Number.isFinite(e.ts))) problems.push(`${at}: ts is not a number`);
    if (e.ph !== "X") return;
    if (!(typeof e.dur === "number" && e.dur >= 0)) problems.push(`${at}: complete event without a dur >= 0`);
    // Whole nanoseconds: the trace's times are microseconds with up to three decimals.
    const start = Math.round((e.ts as number) * 1000);
    const list = complete.get(`${String(e.pid)}/${String(e.tid)}`) ?? [];
    list.push({ name: `${at}`, start, end: start + Math.round((e.dur as number) * 1000) });
    complete.set(`${String(e.pid)}/${String(e.tid)}`, list);
  });
  for (const [thread, list] of complete) {
    // Parents first: by start, the longer of two that start together first.
    list.sort((a, b) => a.start - b.start || b.end - a.end);
    const open: { name: string; end: number }[] = [];
    for (const e of list) {
      while (open.length > 0 && open.at(-1)!.end <= e.start) open.pop();
      const parent = open.at(-1);
      if (parent && e.end > parent.end) problems.push(`thread ${thread}: ${e.name} starts inside ${parent.name} but ends after it`);
      open.push(e);
    }
  }
  return problems;
}
