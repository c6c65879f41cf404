import os from "node:os";
import { type Backend, ConfigError, DeviceError } from "@kiln/contract";
import type { SamplerCursor } from "@kiln/core";
import {
  type Communicator,
  DEFAULT_MASTER_ADDR,
  DEFAULT_MASTER_PORT,
  type NcclCommunicator,
  type RankEnvironment,
  createCpuCommunicator,
  createGlooCommunicator,
  createNcclCommunicator,
  freePort,
  glooStatus,
  launchRanks,
} from "@kiln/distributed";
import type { RunSettings, TargetDevice } from "@kiln/core";
import { gpuUnavailableReason, importCuda, trainsOnCuda } from "./open-backend.js";
import { STOP_SIGNALS, type StopSignal } from "./stop-signals.js";

/** The flags of a data-parallel run. */
export interface DataParallelFlags {
  /** Rank processes kiln starts on this machine. */
  ranks?: number;
  /** GPU ordinals: one rank per GPU on this machine. */
  gpus?: number[];
  /** Machines in the run, and this one's index (each starts its ranks). */
  nnodes?: number;
  nodeRank?: number;
  masterAddr?: string;
  masterPort?: number;
  syncBackend?: SyncChoice;
  /** Times the ranks are started again, from the newest checkpoint, after one fails. */
  maxRestarts?: number;
}

/** What --sync-backend takes. */
export const SYNC_BACKENDS = ["cpu", "gloo", "nccl"] as const;
export type SyncChoice = (typeof SYNC_BACKENDS)[number];

/** Ranks this machine runs: one per --gpus entry, else --ranks. */
export function ranksHere(flags: DataParallelFlags): number {
  return flags.gpus?.length ?? flags.ranks ?? 1;
}

/** Refuses, before anything is read, data-parallel flags that do not fit together. */
export function checkDataParallelFlags(flags: DataParallelFlags, targetDevice: TargetDevice): void {
  if (flags.gpus !== undefined && flags.ranks !== undefined && flags.ranks !== flags.gpus.length) {
    throw new ConfigError(`--ranks ${flags.ranks} disagrees with --gpus ${flags.gpus.join(",")} (${flags.gpus.length} GPUs, one rank each)`, {
      where: "--ranks",
      hint: "leave --ranks out with --gpus: each listed GPU gets one rank",
    });
  }
  if (flags.gpus !== undefined && targetDevice === "cpu") {
    throw new ConfigError("--gpus trains on GPUs, but the target device is cpu (--target-device or trainer.target_device)", {
      where: "--gpus",
      hint: "drop --target-device cpu (auto and gpu both take the GPUs), or use --ranks N for data parallel on the CPU",
    });
  }
  if (flags.nodeRank !== undefined && flags.nodeRank >= (flags.nnodes ?? 1)) {
    throw new ConfigError(`--node-rank ${flags.nodeRank} is outside 0..${(flags.nnodes ?? 1) - 1}`, {
      where: "--node-rank",
      hint: "with --nnodes N, give each machine its own --node-rank from 0 to N - 1 (0 on the machine at --master-addr)",
    });
  }
}

/** Whether this command should start rank processes itself (--ranks, --gpus, --nnodes) rather than train. */
export function startsRanks(flags: DataParallelFlags): boolean {
  return ranksHere(flags) * (flags.nnodes ?? 1) > 1;
}

/** Checks that --ranks/--gpus and --nnodes agree with WORLD_SIZE when a launcher (kiln's or torchrun) started this rank. */
export function checkRanksAgree(flags: DataParallelFlags, env: RankEnvironment): void {
  const asked = ranksHere(flags) * (flags.nnodes ?? 1);
  if (startsRanks(flags) && asked !== env.worldSize) {
    const what = flags.gpus ? `--gpus ${flags.gpus.join(",")}` : `--ranks ${flags.ranks ?? 1}`;
    throw new ConfigError(`${what}${flags.nnodes ? ` x --nnodes ${flags.nnodes}` : ""} disagrees with WORLD_SIZE=${env.worldSize}`, {
      where: flags.nnodes ? "--nnodes" : flags.gpus ? "--gpus" : "--ranks",
      hint: "pass --ranks or --gpus (and --nnodes) only to let kiln start the ranks itself; under torchrun or Slurm leave them out",
    });
  }
}

/**
 * Starts this machine's ranks (one per --gpus entry, else --ranks) as processes of this same
 * command (torchrun's variables set: with --nnodes N --node-rank R they are ranks R x ranks ...
 * of N x ranks) and waits for them. With --max-restarts K, when a rank fails (not when the run
 * was stopped by a signal) every rank is started again, up to K times, resuming from the newest
 * checkpoint in the output folder (--resume auto): resume is bit-exact, so the run ends with the
 * weights an uninterrupted one has, and its metrics log keeps each step once.
 */
export async function launchThisCommand(flags: DataParallelFlags, s: RunSettings): Promise<number> {
  const ranks = ranksHere(flags);
  const nnodes = flags.nnodes ?? 1;
  const command = process.argv.slice(1);
  const stopCodes = new Set<number>(Object.values(STOP_SIGNALS));
  for (let restart = 0; ; restart++) {
    const code = await launchRanks({
      ranks,
      firstRank: (flags.nodeRank ?? 0) * ranks,
      worldSize: nnodes * ranks,
      command: process.execPath,
      args: [...process.execArgv, ...(restart === 0 ? command : resumingArgs(command))],
      masterAddr: flags.masterAddr ?? DEFAULT_MASTER_ADDR,
      // Across machines every node must know the port beforehand; on one machine any free one does (a new one each start).
      masterPort: flags.masterPort ?? (nnodes > 1 ? DEFAULT_MASTER_PORT : await freePort()),
      // A failed rank's peers notice within their timeout and stop, naming it; after that they are terminated.
      graceMs: 1.5 * s.syncTimeout * 1000 + 5000,
    });
    if (code === 0 || stopCodes.has(code) || restart >= (flags.maxRestarts ?? 0)) return code;
    process.stderr.write(`restart ${restart + 1} of ${flags.maxRestarts}: every rank starts again from the newest checkpoint in ${s.outputDir} (--resume auto)\n`);
  }
}

/** The command line of a restart: --resume auto in place of --resume and --overwrite (which would move the run being continued aside). */
export function resumingArgs(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--overwrite" || a.startsWith("--resume=")) continue;
    if (a === "--resume") {
      i++;
      continue;
    }
    out.push(a);
  }
  return [...out, "--resume", "auto"];
}

/**
 * Before any rank starts, what every rank would refuse, said once: --sync-backend nccl for
 * ranks on the CPU; with --gpus (and no KILN_BACKEND), GPUs that are not usable or not visible.
 */
export async function checkBeforeLaunch(flags: DataParallelFlags, targetDevice: TargetDevice): Promise<void> {
  if (flags.syncBackend === "nccl" && !(await trainsOnCuda(targetDevice))) throw ncclOnCpu();
  if (!flags.gpus || process.env.KILN_BACKEND) return;
  const why = await gpuUnavailableReason();
  if (why !== undefined) {
    throw new DeviceError(`cannot use the GPU: ${why}`, {
      where: "--target-device gpu",
      hint: "--gpus needs NVIDIA GPUs with their driver; on the CPU use --ranks N --target-device cpu",
    });
  }
  const visible = (await importCuda("--gpus")).cudaStatus().runtime.deviceCount;
  const missing = flags.gpus.filter((g) => g >= visible);
  if (missing.length > 0) {
    throw new DeviceError(`GPU ${missing.join(", ")} does not exist: ${visible} visible`, {
      where: "--gpus",
      hint: `list ordinals between 0 and ${visible - 1} (CUDA_VISIBLE_DEVICES narrows what is visible)`,
    });
  }
}

/**
 * One rank (no --ranks, --gpus, --nnodes, no launcher): --sync-backend nccl on the CPU is
 * refused as with many ranks; any --sync-backend gets a warning that one rank syncs nothing.
 */
export async function checkOneRankSync(flags: DataParallelFlags, targetDevice: TargetDevice, warn: (line: string) => void): Promise<void> {
  if (flags.syncBackend === undefined) return;
  if (flags.syncBackend === "nccl" && !(await trainsOnCuda(targetDevice))) throw ncclOnCpu();
  warn(`warning: --sync-backend ${flags.syncBackend} has no effect: this run has one rank (data parallel needs --ranks N, --gpus LIST or a launcher such as torchrun)`);
}

function ncclOnCpu(): ConfigError {
  return new ConfigError("--sync-backend nccl syncs GPU buffers, but this run trains on the CPU", {
    where: "--sync-backend",
    hint: "use --sync-backend cpu (or gloo) for CPU ranks, or train on GPUs (--gpus 0,1 or --target-device gpu)",
  });
}

/** This rank's GPU: its entry of --gpus, else its local rank (torchrun's convention), among the visible devices. */
export function gpuOfRank(flags: DataParallelFlags, env: RankEnvironment): number {
  return flags.gpus ? flags.gpus[env.localRank] : env.localRank;
}

export interface SyncChoiceMade {
  kind: "cpu" | "gloo" | "nccl";
  why: string;
}

/**
 * The sync backend a run uses, and why: the flag (nccl only for ranks on CUDA devices); else for
 * GPU ranks NCCL where it is found; else on one machine `cpu` (shared memory), across machines
 * Gloo where it is installed (its ring beats kiln's star over a network), else `cpu` over TCP.
 */
export async function chooseSyncBackend(flags: DataParallelFlags, env: RankEnvironment, onCuda: boolean): Promise<SyncChoiceMade> {
  if (flags.syncBackend === "nccl" && !onCuda) throw ncclOnCpu();
  if (flags.syncBackend) return { kind: flags.syncBackend, why: "--sync-backend" };
  if (onCuda) {
    const nccl = (await importCuda("--sync-backend nccl")).ncclLibraryStatus();
    if (nccl.found) return { kind: "nccl", why: `default for GPU ranks: NCCL ${nccl.version} found` };
    const staged = env.worldSize === env.localWorldSize ? "cpu" : glooStatus().available ? "gloo" : "cpu";
    return { kind: staged, why: `default for GPU ranks without NCCL (${nccl.problem}): host staging` };
  }
  if (env.worldSize === env.localWorldSize) return { kind: "cpu", why: "default for ranks on one machine" };
  const gloo = glooStatus();
  return gloo.available ? { kind: "gloo", why: "default across machines" } : { kind: "cpu", why: `default across machines without Gloo: ${gloo.reason}` };
}

/** This rank's communicator: rank 0 listens on MASTER_ADDR:MASTER_PORT (or the flags), the others connect. */
export async function joinRanks(env: RankEnvironment, flags: DataParallelFlags, s: RunSettings, sync: SyncChoiceMade): Promise<Communicator> {
  const o = {
    rank: env.rank,
    worldSize: env.worldSize,
    host: flags.masterAddr ?? env.masterAddr,
    port: flags.masterPort ?? env.masterPort,
    timeoutMs: s.syncTimeout * 1000,
  };
  if (sync.kind === "nccl") {
    const cuda = await importCuda("--sync-backend nccl");
    return createNcclCommunicator({ ...o, uniqueId: () => cuda.ncclUniqueId() });
  }
  // GLOO_SOCKET_IFNAME names the network interface Gloo binds to, as in PyTorch.
  const iface = process.env.GLOO_SOCKET_IFNAME;
  return sync.kind === "gloo" ? createGlooCommunicator({ ...o, ...(iface ? { iface } : {}) }) : createCpuCommunicator(o);
}

/** For the nccl backend: joins NCCL on this rank's (CUDA) backend, once it is open. Other backends need nothing. */
export async function joinDevice(comm: Communicator, backend: Backend, s: RunSettings): Promise<void> {
  if (comm.kind !== "nccl") return;
  const cuda = await importCuda("--sync-backend nccl");
  await (comm as NcclCommunicator).joinDevice((uniqueId) => cuda.openNcclCollectives(backend, { uniqueId, rank: comm.rank, worldSize: comm.worldSize, timeoutMs: s.syncTimeout * 1000 }));
}

/** CPU threads for this rank when --threads is not given: the machine's cores shared out between its ranks. */
export function threadsPerRank(env: RankEnvironment): number {
  return Math.max(1, Math.floor(os.availableParallelism() / env.localWorldSize));
}

/**
 * Whether any rank was asked to stop (a signal reaches ranks at different steps), and by
 * which signal: every rank then stops after the same step, with the same exit code.
 */
export async function anyRankStops(comm: Communicator, signal: StopSignal | undefined): Promise<StopSignal | undefined> {
  const names = Object.keys(STOP_SIGNALS) as StopSignal[];
  const votes = await comm.allReduceScalars(Float64Array.from(names, (n) => (n === signal ? 1 : 0)), "sum");
  return names.find((_, i) => votes[i] > 0);
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
  return (
    `  ranks   ${comm.worldSize} processes, ${comm.kind} sync (${why}) through ${comm.dataPath}, rank 0 at ${rendezvous}; ${threads} thread${threads === 1 ? "" : "s"} each; ` +
    `global batch ${comm.worldSize} x ${s.batchSize} x ${s.seqLen} tokens x ${s.gradAccum} accumulation = ${tokens} tokens` +
    (s.shardOptimizer ? `; optimizer state sharded over the ${comm.worldSize} ranks (ZeRO stage 1: gradients reduce-scattered, parameters all-gathered)` : "")
  );
}
