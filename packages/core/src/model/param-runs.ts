import { bytesPerElement } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import type { ParamLayout, ParamSpec } from "./param-layout.js";

/** Consecutive parameters that one elementwise kernel call can cover: from `first`'s offset, `n` elements. */
export interface ParamRun {
  first: ParamSpec;
  n: number;
}

/**
 * The parameters of `layouts` (the same specs stored in the same order, in different
 * dtypes), in buffer order, cut into runs that lie back to back in every layout: a run goes on while the next
 * parameter starts exactly where the run's elements end in each layout (no alignment
 * padding in between) and `together` accepts it. An elementwise kernel over a run
 * touches every element of its parameters and nothing else, so a per-parameter loop
 * becomes one call per run with the same result for every element.
 */
export function paramRuns(layouts: readonly ParamLayout[], together: (run: ParamSpec, next: ParamSpec) => boolean = () => true): ParamRun[] {
  const runs: ParamRun[] = [];
  // Parameters every layout holds: a trained-only layout (gradients, optimizer state) leaves out the frozen ones.
  for (const s of layouts[0].stored.filter((p) => layouts.every((l) => l.offsets.has(p.name)))) {
    const last = runs.at(-1);
    const adjoins =
      last !== undefined &&
      together(last.first, s) &&
      layouts.every((l) => l.offsets.get(s.name) === l.offsets.get(last.first.name)! + last.n * bytesPerElement(l.dtype));
    if (adjoins) last.n += elementCount(s.shape);
    else runs.push({ first: s, n: elementCount(s.shape) });
  }
  return runs;
}
