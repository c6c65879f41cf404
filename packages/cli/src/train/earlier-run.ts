import fs from "node:fs";
import path from "node:path";
import { CheckpointError, ConfigError } from "@kiln/contract";
import { fileWriteError } from "@kiln/core";
import { DAMAGED_SUFFIX, STEP_FILE } from "./checkpoint-files.js";

/** What a training run leaves in its output folder (kiln.lock aside: it marks a run under way). */
const RUN_ENTRIES = [/^(final|best)\.safetensors$/, /^metrics\.jsonl$/, /^tensorboard$/, /^profile\.json$/, /^trace\.json$/];

/** Where --overwrite moves an earlier run: a dated folder inside the output folder. */
export const EARLIER_RUN_PREFIX = "earlier-run-";

/** The entries of `dir` that an earlier run wrote, sorted (none when the folder is missing). */
export function earlierRunEntries(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => (stepOf(n) !== undefined || RUN_ENTRIES.some((r) => r.test(n))) && !isEmptyFolder(path.join(dir, n))).sort(byStep);
}

/** The step of a step checkpoint's name (one renamed *.damaged too), else undefined. */
function stepOf(name: string): number | undefined {
  const m = STEP_FILE.exec(name.endsWith(DAMAGED_SUFFIX) ? name.slice(0, -DAMAGED_SUFFIX.length) : name);
  return m ? Number(m[1]) : undefined;
}

/** An empty tensorboard/ holds no run. */
function isEmptyFolder(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory() && fs.readdirSync(p).length === 0;
  } catch {
    return false;
  }
}

/** step_20 before step_100; other names by name. */
function byStep(a: string, b: string): number {
  const [x, y] = [stepOf(a), stepOf(b)];
  return x === undefined || y === undefined ? a.localeCompare(b) : x - y;
}

/**
 * A folder that holds a run is written only by a run that asks for it: without --resume a
 * folder with checkpoints or metrics is refused, naming what is there and the ways on;
 * with --overwrite the earlier run is moved aside first (moveEarlierRunAside).
 */
export function checkOutputFolder(dir: string, o: { resume: boolean; overwrite: boolean }): void {
  checkReuseFlags(o);
  if (o.resume || o.overwrite) return;
  const found = earlierRunEntries(dir);
  if (found.length === 0) return;
  const shown = found.length <= 6 ? found.join(", ") : `${found.slice(0, 3).join(", ")}, ... ${found.slice(-2).join(", ")} (${found.length} in all)`;
  throw new CheckpointError(`the output folder holds an earlier run (${shown}); a new run would mix with it`, {
    where: dir,
    hint: `continue that run with --resume auto; or give this run its own --output-dir; or pass --overwrite to move the earlier run into ${path.join(dir, `${EARLIER_RUN_PREFIX}<date>`)} and start afresh`,
  });
}

/** Refuses --overwrite beside --resume (before anything is read). */
export function checkReuseFlags(o: { resume: boolean; overwrite: boolean }): void {
  if (o.resume && o.overwrite) {
    throw new ConfigError("--overwrite starts a new run, but --resume continues the one in the output folder", {
      where: "--overwrite",
      hint: "pass one of the two: --resume to continue the run, --overwrite to move it aside and start afresh",
    });
  }
}

/** --overwrite: moves every entry of the earlier run into <dir>/earlier-run-<date>; returns that folder (undefined when there was nothing). */
export function moveEarlierRunAside(dir: string, now = new Date()): string | undefined {
  const found = earlierRunEntries(dir);
  if (found.length === 0) return undefined;
  const stamp = now.toISOString().replace(/\.\d+Z$/, "").replace(/:/g, "-");
  let aside = path.join(dir, `${EARLIER_RUN_PREFIX}${stamp}`);
  for (let n = 2; fs.existsSync(aside); n++) aside = path.join(dir, `${EARLIER_RUN_PREFIX}${stamp}-${n}`);
  try {
    fs.mkdirSync(aside);
    // Renames within one folder: each entry moves whole, nothing is copied.
    for (const name of found) fs.renameSync(path.join(dir, name), path.join(aside, name));
  } catch (err) {
    throw fileWriteError(err, aside, { what: "the earlier run", doing: "move the earlier run aside", error: CheckpointError, after: "Else give this run its own --output-dir." });
  }
  return aside;
}
