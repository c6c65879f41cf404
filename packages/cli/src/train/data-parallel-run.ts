import os from "node:os";
import { ConfigError } from "@kiln/contract";
import type { SamplerCursor } from "@kiln/core";
import {
  type Communicator,
  DEFAULT_MASTER_ADDR,
  DEFAULT_MASTER_PORT,
  type RankEnvironment,
  createCpuCommunicator,
  createGlooCommunicator,
  freePort,
  glooStatus,
  launchRanks,
} from "@kiln/distributed";
import type { RunSettings } from "../config/settings.js";

/** The flags of a data-parallel run. */
export interface DataParallelFlags {
  /** Rank processes kiln starts on this machine. */
  ranks?: number;
  /** Machines in the run, and this one's index (each starts its --ranks processes). */
  nnodes?: number;
  nodeRank?: number;
  masterAddr?: string;
  masterPort?: number;
  gpus?: string;
  syncBackend?: SyncChoice;
}

/** What --sync-backend takes. */
export const SYNC_BACKENDS = ["cpu", "gloo", "nccl"] as const;
export type SyncChoice = (typeof SYNC_BACKENDS)[number];

/** Refuses, before anything is read, what data-parallel training cannot do yet (GPU ranks, NCCL) and node flags that do not fit together. */
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
      hint: "use --sync-backend gloo or cpu with --ranks N",
    });
  }
  if (flags.nodeRank !== undefined && flags.nodeRank >= (flags.nnodes ?? 1)) {
    throw new ConfigError(`--node-rank ${flags.nodeRank} is outside 0..${(flags.nnodes ?? 1) - 1}`, {
      where: "--node-rank",
      hint: "with --nnodes N, give each machine its own --node-rank from 0 to N - 1 (0 on the machine at --master-addr)",
    });
  }
}

/** Whether this command should start rank processes itself (--ranks, --nnodes) rather than train. */
export function startsRanks(flags: DataParallelFlags): boolean {
  return (flags.ranks ?? 1) * (flags.nnodes ?? 1) > 1;
}

/** Checks that --ranks and --nnodes agree with WORLD_SIZE when a launcher (kiln's or torchrun) started this rank. */
export function checkRanksAgree(flags: DataParallelFlags, env: RankEnvironment): void {
  const asked = (flags.ranks ?? 1) * (flags.nnodes ?? 1);
  if (startsRanks(flags) && asked !== env.worldSize) {
    throw new ConfigError(`--ranks ${flags.ranks ?? 1}${flags.nnodes ? ` x --nnodes ${flags.nnodes}` : ""} disagrees with WORLD_SIZE=${env.worldSize}`, {
      where: flags.nnodes ? "--nnodes" : "--ranks",
      hint: "pass --ranks (and --nnodes) only to let kiln start the ranks itself; under torchrun or Slurm leave them out",
    });
  }
}

/**
 * Starts this machine's `--ranks` processes of this same command (torchrun's variables set: with
 * --nnodes N --node-rank R they are ranks R x ranks ... of N x ranks) and waits for them.
 */
export async function launchThisCommand(flags: DataParallelFlags, s: RunSettings): Promise<number> {
  const ranks = flags.ranks ?? 1;
  const nnodes = flags.nnodes ?? 1;
  return launchRanks({
    ranks,
    firstRank: (flags.nodeRank ?? 0) * ranks,
    worldSize: nnodes * ranks,
    command: process.execPath,
    args: [...process.execArgv, ...process.argv.slice(1)],
    masterAddr: flags.masterAddr ?? DEFAULT_MASTER_ADDR,
    // Across machines every node must know the port beforehand; on one machine any free one does.
    masterPort: flags.masterPort ?? (nnodes > 1 ? DEFAULT_MASTER_PORT : await freePort()),
    // A failed rank's peers notice within their timeout and stop, naming it; after that they are terminated.
    graceMs: 1.5 * s.syncTimeoutMs + 5000,
  });
}

/**
 * The sync backend a run uses, and why: the flag; else on one machine `cpu` (shared memory),
 * across machines Gloo where it is installed (its ring beats kiln's star over a network), else `cpu` over TCP.
 */
export function chooseSyncBackend(flags: DataParallelFlags, env: RankEnvironment): { kind: "cpu" | "gloo"; why: string } {
  if (flags.syncBackend === "cpu" || flags.syncBackend === "gloo") return { kind: flags.syncBackend, why: "--sync-backend" };
  if (env.worldSize === env.localWorldSize) return { kind: "cpu", why: "default for ranks on one machine" };
  const gloo = glooStatus();
  return gloo.available ? { kind: "gloo", why: "default across machines" } : { kind: "cpu", why: `default across machines without Gloo: ${gloo.reason}` };
}

/** This rank's communicator: rank 0 listens on MASTER_ADDR:MASTER_PORT (or the flags), the others connect. */
export function joinRanks(env: RankEnvironment, flags: DataParallelFlags, s: RunSettings): Promise<Communicator> {
  const o = {
    rank: env.rank,
    worldSize: env.worldSize,
    host: flags.masterAddr ?? env.masterAddr,
    port: flags.masterPort ?? env.masterPort,
    timeoutMs: s.syncTimeoutMs,
  };
  // GLOO_SOCKET_IFNAME names the network interface Gloo binds to, as in PyTorch.
  const iface = process.env.GLOO_SOCKET_IFNAME;
  return chooseSyncBackend(flags, env).kind === "gloo" ? createGlooCommunicator({ ...o, ...(iface ? { iface } : {}) }) : createCpuCommunicator(o);
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
export function ranksRow(comm: Communicator, s: RunSettings, threads: number, rendezvous: string, why: string): string {
  const tokens = comm.worldSize * s.batchSize * s.seqLen * s.gradAccum;
  const path = "dataPath" in comm ? String(comm.dataPath) : comm.kind === "gloo" ? "Gloo's TCP ring" : comm.kind;
  return (
    `  ranks   ${comm.worldSize} processes, ${comm.kind} sync (${why}) through ${path}, rank 0 at ${rendezvous}; ${threads} thread${threads === 1 ? "" : "s"} each; ` +
    `global batch ${comm.worldSize} x ${s.batchSize} x ${s.seqLen} tokens x ${s.gradAccum} accumulation = ${tokens} tokens`
  );
}
