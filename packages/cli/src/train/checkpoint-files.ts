import fs from "node:fs";
import path from "node:path";
import { CheckpointError } from "@kiln/contract";
import { fileWriteError } from "@kiln/core";
import { isProcessRunning } from "./process-running.js";

const STEP_FILE = /^step_(\d+)\.safetensors$/;

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
 * The checkpoint `--resume` names: "auto" = the newest in the output folder (undefined
 * when there is none yet), else a path that must exist.
 */
export function resolveResume(resume: string, dir: string): string | undefined {
  if (resume === "auto") return listCheckpoints(dir).at(-1)?.path;
  if (!fs.existsSync(resume)) {
    throw new CheckpointError("the checkpoint to resume from does not exist", { where: resume, hint: `pass an existing .safetensors file, or --resume auto to continue from the newest in ${dir}` });
  }
  return resume;
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
