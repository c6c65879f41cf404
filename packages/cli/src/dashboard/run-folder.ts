import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { didYouMean } from "@kiln/core";
import { metricsFileOf } from "../plot/run-metrics.js";

const RUN_FOLDER_HINT = "Pass the output folder of a kiln train run (--output-dir, or trainer.checkpoint_dir of its config)";

/**
 * Refuses a run the dashboard could only wait for forever: a folder (or a metrics.jsonl's
 * folder) that does not exist, or a path that is a file but not a .jsonl. A folder that
 * exists without metrics.jsonl is a run about to log its first step, and is waited for.
 */
export function checkRunFolder(run: string): void {
  const folder = run.endsWith(".jsonl") ? path.dirname(run) : run;
  const info = statOf(folder);
  if (info === undefined) {
    const near = nearbyFolder(folder);
    throw new DataError("run folder not found", {
      where: folder,
      hint: `${near !== undefined ? `Did you mean ${near}? ` : ""}${RUN_FOLDER_HINT}. To open the dashboard before a run starts, create its folder first (mkdir -p ${folder}).`,
    });
  }
  if (!info.isDirectory()) {
    throw new DataError("not a run folder: this is a file", { where: folder, hint: `${RUN_FOLDER_HINT}, or its metrics.jsonl.` });
  }
  const metrics = statOf(metricsFileOf(run));
  if (metrics?.isDirectory()) throw new DataError("metrics.jsonl is a folder, not a file", { where: metricsFileOf(run), hint: RUN_FOLDER_HINT });
}

function statOf(p: string) {
  try {
    return statSync(p);
  } catch {
    return undefined;
  }
}

/** A folder beside `folder` whose name is a likely typo of its name. */
function nearbyFolder(folder: string): string | undefined {
  const parent = path.dirname(folder);
  let names: string[];
  try {
    names = readdirSync(parent, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return undefined;
  }
  const name = didYouMean(path.basename(folder), names);
  return name === undefined ? undefined : path.join(parent, name);
}
