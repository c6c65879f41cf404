import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { CheckpointError } from "@kiln/contract";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LOCK_FILE, lockOutputDir } from "../src/train/output-lock.js";

let top: string;
beforeEach(async () => {
  top = await mkdtemp(path.join(os.tmpdir(), "kiln-lock-"));
});
afterEach(() => rm(top, { recursive: true, force: true }));

/** A process that runs until killed. */
function sleeper() {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 120000)"], { stdio: "ignore" });
  return { pid: child.pid!, stop: () => child.kill("SIGKILL") };
}

/** The id of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.on("exit", resolve));
  return child.pid!;
}

async function writeLock(dir: string, holder: { pid: number; hostname?: string }) {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, LOCK_FILE), JSON.stringify({ hostname: os.hostname(), started: "2026-01-02T03:04:05.000Z", command: "kiln train -f a.yaml", ...holder }));
}

function refusal(fn: () => unknown): CheckpointError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CheckpointError);
    return err as CheckpointError;
  }
  throw new Error("expected a refusal");
}

describe("lockOutputDir", () => {
  it("creates the folder and a lock naming this process; release removes both when nothing else was written", async () => {
    const dir = path.join(top, "runs", "a");
    const lock = lockOutputDir(dir, () => {});
    const held = JSON.parse(await readFile(path.join(dir, LOCK_FILE), "utf8")) as { pid: number; hostname: string };
    expect(held).toMatchObject({ pid: process.pid, hostname: os.hostname() });
    lock.release();
    expect(existsSync(path.join(top, "runs"))).toBe(false);
  });

  it("leaves a folder that existed, and one with files in it, in place", async () => {
    const dir = path.join(top, "out");
    const lock = lockOutputDir(dir, () => {});
    await writeFile(path.join(dir, "metrics.jsonl"), "");
    lock.release();
    expect(existsSync(path.join(dir, LOCK_FILE))).toBe(false);
    expect(existsSync(path.join(dir, "metrics.jsonl"))).toBe(true);
  });

  it("refuses a folder another running process holds, naming it", async () => {
    const other = sleeper();
    try {
      const dir = path.join(top, "out");
      await writeLock(dir, { pid: other.pid });
      const err = refusal(() => lockOutputDir(dir, () => {}));
      expect(err.where).toBe(dir);
      expect(err.message).toBe(`another kiln run is training into this folder (process ${other.pid}, started 2026-01-02T03:04:05.000Z: kiln train -f a.yaml)`);
      expect(err.hint).toMatch(new RegExp(`choose another --output-dir; if process ${other.pid} is not a kiln run, delete .*${LOCK_FILE}$`));
      // The holder's lock is untouched.
      expect(JSON.parse(await readFile(path.join(dir, LOCK_FILE), "utf8"))).toMatchObject({ pid: other.pid });
    } finally {
      other.stop();
    }
  });

  it("refuses a second lock in the same process", () => {
    const dir = path.join(top, "out");
    const lock = lockOutputDir(dir, () => {});
    try {
      expect(refusal(() => lockOutputDir(dir, () => {})).message).toMatch(new RegExp(`\\(process ${process.pid}, `));
    } finally {
      lock.release();
    }
  });

  it("takes over a lock left by a process that is no longer running, with a warning", async () => {
    const dir = path.join(top, "out");
    const dead = await deadPid();
    await writeLock(dir, { pid: dead });
    const warnings: string[] = [];
    const lock = lockOutputDir(dir, (t) => warnings.push(t));
    expect(warnings).toEqual([`warning: taking over ${path.join(dir, LOCK_FILE)}: it was left by process ${dead}, started 2026-01-02T03:04:05.000Z: kiln train -f a.yaml, which is no longer running`]);
    expect(JSON.parse(await readFile(path.join(dir, LOCK_FILE), "utf8"))).toMatchObject({ pid: process.pid });
    lock.release();
  });

  it("takes over a lock with this process's id that this process does not hold (left by an earlier process with the same id)", async () => {
    const dir = path.join(top, "out");
    await writeLock(dir, { pid: process.pid });
    const warnings: string[] = [];
    lockOutputDir(dir, (t) => warnings.push(t)).release();
    expect(warnings).toHaveLength(1);
  });

  it("refuses a lock from another host, which it cannot check", async () => {
    const dir = path.join(top, "out");
    await writeLock(dir, { pid: await deadPid(), hostname: "some-other-host" });
    expect(refusal(() => lockOutputDir(dir, () => {})).message).toMatch(/\(process \d+ on some-other-host, started /);
  });

  it("refuses a lock file it cannot read rather than guess", async () => {
    const dir = path.join(top, "out");
    await mkdir(dir);
    await writeFile(path.join(dir, LOCK_FILE), "not json");
    const err = refusal(() => lockOutputDir(dir, () => {}));
    expect(err.message).toMatch(/its lock file cannot be read/);
    expect(err.hint).toMatch(/delete .*kiln\.lock if no kiln run uses this folder/);
  });
});
