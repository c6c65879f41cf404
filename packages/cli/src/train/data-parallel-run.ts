import os from "node:os";
import { ConfigError } from "@kiln/contract";
import type { SamplerCursor } from "@kiln/core";
import { type Communicator, DEFAULT_MASTER_ADDR, type RankEnvironment, createCpuCommunicator, freePort, launchRanks } from "@kiln/distributed";
import type { RunSettings } from "../config/settings.js";

/** The flags of a data-parallel run. */
export interface DataParallelFlags {
  ranks?: number;
  masterAddr?: string;
  masterPort?: number;
  gpus?: string;
  syncBackend?: string;
}

/** Refuses, before anything is read, what data-parallel training cannot do yet: GPU ranks and NCCL. */
export function refuseUnavailableSync(flags: DataParallelFlags): void {
  if (flags.gpus !== undefined) {
    throw new ConfigError("data-parallel training on several GPUs is not available yet: it needs the NCCL communicator in @kiln/kernels-cuda and one rank per GPU", {
      where: "--gpus",
      hint: "train on one GPU (drop --gpus), or data-parallel on the CPU with --ranks N --target-device cpu",
    });
  }
  if (flags.syncBackend === "nccl") {
    throw new ConfigError("the nccl sync backend is not available yet: the NCCL communicator in @kiln/kernels-cuda is still to be written", {
      where: "--sync-backend",
      hint: "use --sync-backend cpu (the default) with --ranks N",
    });
  }
}

/** Checks that --ranks agrees with WORLD_SIZE when a launcher (kiln's or torchrun) started this rank. */
export function checkRanksAgree(flags: DataParallelFlags, env: RankEnvironment): void {
  if (flags.ranks !== undefined && flags.ranks !== env.worldSize) {
    throw new ConfigError(`--ranks ${flags.ranks} disagrees with WORLD_SIZE=${env.worldSize}`, {
      where: "--ranks",
      hint: "pass --ranks only to let kiln start the ranks itself; under torchrun or Slurm leave it out",
    });
  }
}

/** Starts `flags.ranks` processes of this same command, one per rank (torchrun's variables set), and waits for them. */
export async function launchThisCommand(flags: DataParallelFlags & { ranks: number }, s: RunSettings): Promise<number> {
  return launchRanks({
    ranks: flags.ranks,
    command: process.execPath,
    args: [...process.execArgv, ...process.argv.slice(1)],
    masterAddr: flags.masterAddr ?? DEFAULT_MASTER_ADDR,
    masterPort: flags.masterPort ?? (await freePort()),
    // A failed rank's peers notice within their timeout and stop, naming it; after that they are terminated.
    graceMs: 1.5 * s.syncTimeoutMs + 5000,
  });
}

/** This rank's communicator: rank 0 listens on MASTER_ADDR:MASTER_PORT (or the flags), the others connect. */
export function joinRanks(env: RankEnvironment, flags: DataParallelFlags, s: RunSettings): Promise<Communicator> {
  return createCpuCommunicator({
    rank: env.rank,
    worldSize: env.worldSize,
    host: flags.masterAddr ?? env.masterAddr,
    port: flags.masterPort ?? env.masterPort,
    timeoutMs: s.syncTimeoutMs,
  });
}

/** CPU threads for this rank when --threads is not given: the machine's cores shared out between its ranks. */
export function threadsPerRank(env: RankEnvironment): number {
  return Math.max(1, Math.floor(os.availableParallelism() / env.localWorldSize));
}

/** Whether any rank wants to stop (Ctrl-C reaches ranks at different steps): every rank then stops after the same step. */
export async function anyRankStops(comm: Communicator, stop: boolean): Promise<boolean> {
  return (await comm.allReduceScalars(Float64Array.of(stop ? 1 : 0), "sum"))[0] > 0;
}

/** Every rank's data cursor, by rank (each rank puts its own at its slot of a sum). */
export async function gatherCursors(comm: Communicator, cursor: SamplerCursor): Promise<SamplerCursor[]> {
  const slots = new Float64Array(2 * comm.worldSize);
  slots[2 * comm.rank] = cursor.epoch;
  slots[2 * comm.rank + 1] = cursor.index;
  const all = await comm.allReduceScalars(slots, "sum");
  return Array.from({ length: comm.worldSize }, (_, r) => ({ epoch: all[2 * r], index: all[2 * r + 1] }));
}

/** The banner row of a data-parallel run: ranks, sync and the global batch. */
export function ranksRow(comm: Communicator, s: RunSettings, threads: number, where: string): string {
  const tokens = comm.worldSize * s.batchSize * s.seqLen * s.gradAccum;
  return (
    `  ranks   ${comm.worldSize} processes, ${comm.kind} sync via ${where}, ${threads} thread${threads === 1 ? "" : "s"} each; ` +
    `global batch ${comm.worldSize} x ${s.batchSize} x ${s.seqLen} tokens x ${s.gradAccum} accumulation = ${tokens} tokens`
  );
}
