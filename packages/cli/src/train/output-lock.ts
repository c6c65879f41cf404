import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { CheckpointError } from "@kiln/contract";
import { ensureWritableDir } from "./checkpoint-files.js";
import { isProcessRunning } from "./process-running.js";

/** The lock file a training run keeps in its output folder. */
export const LOCK_FILE = "kiln.lock";

/** What a lock file says about the run that holds it. */
export interface LockHolder {
  pid: number;
  hostname: string;
  /** ISO time the run took the lock. */
  started: string;
  /** The command line, for the message a second run prints. */
  command: string;
}

/** A held lock: release() removes it (and the output folder, when the lock created it and it stayed empty). */
export interface OutputLock {
  readonly file: string;
  release(): void;
}

function readHolder(file: string): LockHolder | undefined {
  try {
    const h = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<LockHolder>;
    if (typeof h.pid === "number" && typeof h.hostname === "string" && typeof h.started === "string") {
      return { pid: h.pid, hostname: h.hostname, started: h.started, command: typeof h.command === "string" ? h.command : "" };
    }
  } catch {
    // Missing, or not a lock kiln wrote.
  }
  return undefined;
}

const sameHolder = (a: LockHolder | undefined, b: LockHolder) => a !== undefined && a.pid === b.pid && a.hostname === b.hostname && a.started === b.started;

/** Places `holder`'s lock at `file` unless one is there: written beside it, then hard-linked in (atomic, never half-written). */
function tryPlace(file: string, holder: LockHolder): boolean {
  const staged = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(staged, `${JSON.stringify(holder)}\n`);
  try {
    fs.linkSync(staged, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    // File systems without hard links: exclusive create (a reader may briefly see it empty).
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "ENOSYS") throw err;
    try {
      fs.writeFileSync(file, `${JSON.stringify(holder)}\n`, { flag: "wx" });
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw e;
    }
  } finally {
    fs.rmSync(staged, { force: true });
  }
}

/** Lock files this process holds (main() may run more than once in one process). */
const heldHere = new Set<string>();

/**
 * Whether the holder may still be training: a running process on this host, or any
 * process on another host (kiln cannot tell). A lock with this process's own id that it
 * does not hold was left by an earlier process with the same id (a restarted container).
 */
function mayBeRunning(h: LockHolder, file: string): boolean {
  if (h.hostname !== os.hostname()) return true;
  return h.pid === process.pid ? heldHere.has(path.resolve(file)) : isProcessRunning(h.pid);
}

function describeHolder(h: LockHolder): string {
  return `process ${h.pid}${h.hostname === os.hostname() ? "" : ` on ${h.hostname}`}, started ${h.started}${h.command ? `: ${h.command}` : ""}`;
}

/**
 * Takes the output folder for this run, creating the folder: one run per folder, so two
 * runs never write over each other's checkpoints and metrics. A folder held by a running
 * process is refused with a CheckpointError naming it; a lock left by a process that is no
 * longer running is taken over, with `warn` told.
 */
export function lockOutputDir(dir: string, warn: (text: string) => void): OutputLock {
  const created = ensureWritableDir(dir);
  const file = path.join(dir, LOCK_FILE);
  const me: LockHolder = { pid: process.pid, hostname: os.hostname(), started: new Date().toISOString(), command: ["kiln", ...process.argv.slice(2)].join(" ") };
  for (let attempt = 0; ; attempt++) {
    if (tryPlace(file, me)) break;
    const holder = readHolder(file);
    if (holder === undefined && attempt < 20) {
      // Being written by the fallback path, or removed just now: look again shortly.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      continue;
    }
    if (holder === undefined || mayBeRunning(holder, file)) {
      throw new CheckpointError(`another kiln run is training into this folder (${holder ? describeHolder(holder) : "its lock file cannot be read"})`, {
        where: dir,
        hint: holder
          ? `wait for it to finish or stop it, or choose another --output-dir; if process ${holder.pid} is not a kiln run, delete ${file}`
          : `choose another --output-dir, or delete ${file} if no kiln run uses this folder`,
      });
    }
    // A dead holder's lock: move it aside (atomic: of two runs doing this, one gets it) and
    // check it is still the one judged dead before dropping it.
    const aside = `${file}.${process.pid}.stale`;
    try {
      fs.renameSync(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw err;
    }
    const moved = readHolder(aside);
    if (sameHolder(moved, holder)) {
      fs.rmSync(aside, { force: true });
      warn(`warning: taking over ${file}: it was left by ${describeHolder(holder)}, which is no longer running`);
    } else {
      // Another run replaced the stale lock in between: put its lock back and look again.
      try {
        fs.linkSync(aside, file);
      } catch {
        // A third run took the folder meanwhile; the next look finds it.
      }
      fs.rmSync(aside, { force: true });
    }
  }
  heldHere.add(path.resolve(file));
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    heldHere.delete(path.resolve(file));
    process.off("exit", release);
    if (sameHolder(readHolder(file), me)) fs.rmSync(file, { force: true });
    removeIfEmpty(dir, created);
  };
  // Also on process.exit() (a second Ctrl-C); a killed process leaves a stale lock, taken over next time.
  process.on("exit", release);
  return { file, release };
}

/** Removes `dir` and its parents up to `createdTop` while they are empty (folders this run created and left unused). */
function removeIfEmpty(dir: string, createdTop: string | undefined): void {
  if (createdTop === undefined) return;
  const top = path.resolve(createdTop);
  for (let d = path.resolve(dir); d.startsWith(top); d = path.dirname(d)) {
    try {
      fs.rmdirSync(d);
    } catch {
      return;
    }
    if (d === top) return;
  }
}
