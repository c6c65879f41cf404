import { type ChildProcess, spawn } from "node:child_process";
import os from "node:os";
import readline from "node:readline";

export interface LaunchOptions {
  /** Processes to start, one per rank, on this machine. */
  ranks: number;
  /** The global rank of the first of them (default 0), and of how many ranks on every machine (default `ranks`). */
  firstRank?: number;
  worldSize?: number;
  /** The program and arguments every rank runs (the same for all; the environment tells them apart). */
  command: string;
  args: readonly string[];
  masterAddr: string;
  masterPort: number;
  /** After one rank fails, how long the others get to stop on their own (they name the failed rank) before they are terminated. */
  graceMs: number;
  /** Where lines of ranks other than 0 and the launcher's own messages go (default: stderr). */
  log?: (line: string) => void;
}

/**
 * Starts one process per rank, as torchrun does: the same command with WORLD_SIZE,
 * RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. Rank 0
 * keeps this terminal's stdout and stderr; the other ranks' stdout is dropped
 * (rank 0 alone reports) and their stderr comes through prefixed with their
 * rank. Resolves to the exit code of the run: 0 when every rank succeeded, else
 * the first failing rank's code (128 + signal number for a killed rank).
 */
export async function launchRanks(o: LaunchOptions): Promise<number> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const children: ChildProcess[] = [];
  const exits: Promise<{ local: number; rank: number; code: number; how: string }>[] = [];
  const firstRank = o.firstRank ?? 0;
  for (let local = 0; local < o.ranks; local++) {
    const rank = firstRank + local;
    const env = {
      ...process.env,
      WORLD_SIZE: String(o.worldSize ?? o.ranks),
      RANK: String(rank),
      LOCAL_RANK: String(local),
      LOCAL_WORLD_SIZE: String(o.ranks),
      MASTER_ADDR: o.masterAddr,
      MASTER_PORT: String(o.masterPort),
    };
    const child = spawn(o.command, o.args, { env, stdio: rank === 0 ? "inherit" : ["ignore", "ignore", "pipe"] });
    if (child.stderr) readline.createInterface({ input: child.stderr }).on("line", (line) => log(`rank ${rank}: ${line}`));
    children.push(child);
    exits.push(
      new Promise((resolve) => {
        child.on("error", (err) => resolve({ local, rank, code: 1, how: `could not start (${err.message})` }));
        child.on("exit", (code, signal) => resolve({ local, rank, code: code ?? 128 + (signal ? os.constants.signals[signal] : 0), how: signal ? `was killed by ${signal}` : `exited with code ${code}` }));
      }),
    );
  }
  // Ctrl-C reaches every rank from the terminal; they agree on the step to stop after. The launcher waits for them.
  const ignoreSigint = () => undefined;
  process.on("SIGINT", ignoreSigint);
  // SIGTERM and SIGHUP reach the launcher alone (timeout, docker stop, a closed terminal): passed on to every rank, which stop and save as with Ctrl-C.
  let forwarded: NodeJS.Signals | undefined;
  const forward = (signal: NodeJS.Signals) => {
    forwarded = signal;
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  process.on("SIGTERM", forward);
  process.on("SIGHUP", forward);
  try {
    let failed: { local: number; rank: number; code: number; how: string } | undefined;
    const pending = new Set(exits.map((_, r) => r));
    let killTimer: NodeJS.Timeout | undefined;
    while (pending.size > 0) {
      const done = await Promise.race([...pending].map((r) => exits[r]));
      pending.delete(done.local);
      if (done.code !== 0 && failed === undefined) {
        failed = done;
        // A rank that stopped on a signal (Ctrl-C, or one passed on) is no failure of its own to report.
        if (done.code !== 130 && !(forwarded && done.code === 128 + os.constants.signals[forwarded])) log(`rank ${done.rank} ${done.how}; the other ranks stop too`);
        killTimer = setTimeout(() => {
          for (const r of pending) children[r].kill("SIGTERM");
        }, o.graceMs);
      }
    }
    if (killTimer) clearTimeout(killTimer);
    return failed?.code ?? 0;
  } finally {
    process.off("SIGINT", ignoreSigint);
    process.off("SIGTERM", forward);
    process.off("SIGHUP", forward);
  }
}
