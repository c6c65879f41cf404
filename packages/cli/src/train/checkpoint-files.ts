import fs from "node:fs";
import path from "node:path";
import { CheckpointError } from "@kiln/contract";
import { META_STEP, type SafetensorsReader, fileWriteError, openSafetensors } from "@kiln/core";
import { isProcessRunning } from "./process-running.js";

/** step_<N>.safetensors; the step is group 1. */
export const STEP_FILE = /^step_(\d+)\.safetensors$/;

/** step_<N>.safetensors inside `dir`. */
export function checkpointPath(dir: string, step: number): string {
  return path.join(dir, `step_${step}.safetensors`);
}

/** The step checkpoints in `dir`, oldest first (none when the folder does not exist). */
export function listCheckpoints(dir: string): { step: number; path: string }[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .map((n) => STEP_FILE.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ step: Number(m[1]), path: path.join(dir, m[0]) }))
    .sort((a, b) => a.step - b.step);
}

/** Deletes all but the newest `keep` step checkpoints. */
export function pruneCheckpoints(dir: string, keep: number): void {
  const all = listCheckpoints(dir);
  for (const c of all.slice(0, Math.max(0, all.length - keep))) fs.rmSync(c.path, { force: true });
}

/**
 * The checkpoint `--resume` names: "auto" = the newest good one in the output folder
 * (undefined when there is none yet), else a path that must exist. With "auto" newer
 * checkpoints that do not open (truncated, not safetensors, no step) are named and, by
 * the rank that writes (`moveAside`), renamed <file>.damaged; when none opens, the
 * newest's fault is the error.
 */
export async function resolveResume(resume: string, dir: string, o: { moveAside: boolean; say: (line: string) => void }): Promise<string | undefined> {
  if (resume !== "auto") {
    if (!fs.existsSync(resume)) {
      throw new CheckpointError("the checkpoint to resume from does not exist", { where: resume, hint: `pass an existing .safetensors file, or --resume auto to continue from the newest in ${dir}` });
    }
    return resume;
  }
  const all = listCheckpoints(dir).reverse();
  const damaged: { path: string; damage: CheckpointError }[] = [];
  for (const c of all) {
    const damage = await checkpointDamage(c.path);
    if (damage === undefined) {
      for (const d of damaged) {
        const aside = `${d.path}${DAMAGED_SUFFIX}`;
        if (o.moveAside) fs.renameSync(d.path, aside);
        o.say(`warning: ${d.path} is damaged (${d.damage.message})${o.moveAside ? `; renamed it ${aside}` : ""}; resuming from an earlier checkpoint`);
      }
      return c.path;
    }
    damaged.push({ path: c.path, damage });
  }
  if (damaged.length === 0) return undefined;
  // Not one opens: nothing to fall back on, so nothing is renamed and the run does not start afresh over them.
  const newest = damaged[0].damage;
  throw new CheckpointError(`${newest.message}; ${damaged.length === 1 ? "it is the only step checkpoint" : `none of the ${damaged.length} step checkpoints`} in ${dir} ${damaged.length === 1 ? "there" : "opens"}`, {
    where: newest.where ?? damaged[0].path,
    hint: `${newest.hint ? `${newest.hint.replace(/\.$/, "")}. ` : ""}Else start afresh with --overwrite (the damaged files are moved aside), or in another --output-dir`,
  });
}

/** What a damaged checkpoint gets appended to its name by --resume auto. */
export const DAMAGED_SUFFIX = ".damaged";

/** Why a step checkpoint cannot be resumed from (undefined when its header, tensor extents and step are sound). */
async function checkpointDamage(file: string): Promise<CheckpointError | undefined> {
  let reader: SafetensorsReader | undefined;
  try {
    reader = await openSafetensors(file);
    const step = reader.metadata[META_STEP];
    if (step !== undefined && /^\d+$/.test(step)) return undefined;
    return new CheckpointError(`metadata ${META_STEP} is ${JSON.stringify(step)}, not a step count`, { where: file, hint: "the checkpoint is damaged or was not written by kiln train" });
  } catch (err) {
    if (err instanceof CheckpointError) return err;
    throw err;
  } finally {
    await reader?.close();
  }
}

/**
 * Makes sure checkpoints can be written to `dir`, creating it; refuses with the reason
 * otherwise. Returns the first folder it created (undefined when `dir` existed).
 */
export function ensureWritableDir(dir: string): string | undefined {
  try {
    const created = fs.mkdirSync(dir, { recursive: true });
    fs.accessSync(dir, fs.constants.W_OK);
    const probe = path.join(dir, `.kiln-write-probe-${process.pid}`);
    fs.writeFileSync(probe, "");
    fs.rmSync(probe);
    return created;
  } catch (err) {
    throw fileWriteError(err, dir, {
      what: "checkpoints",
      doing: "write checkpoints to this folder",
      error: CheckpointError,
      after: "Else choose another --output-dir (or trainer.checkpoint_dir) that you can write to.",
    });
  }
}

/** Temp files of checkpoint writes whose writer died (named .<file>.<pid>.<hex>.tmp): removed, with their count. */
export function removeStaleTempFiles(dir: string): number {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const m = /^\..+\.(\d+)\.[0-9a-f]+\.tmp$/.exec(name);
    if (!m || isAlive(Number(m[1]))) continue;
    fs.rmSync(path.join(dir, name), { force: true });
    removed++;
  }
  return removed;
}

function isAlive(pid: number): boolean {
  return pid === process.pid || isProcessRunning(pid);
}
