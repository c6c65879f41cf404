import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import { TrainingError } from "@kiln/contract";
import { type ShmGroupHandle, loadSharedMemory } from "./native-addons.js";
import { partOf } from "./rank-order-reductions.js";
import type { StarGroup } from "./star-group.js";

/**
 * Bytes of each slot of the segment (operands larger go through it chunk by
 * chunk): the segment, 2 x (ranks + 1) slots, stays within 48 MiB, which fits
 * a container's default 64 MiB /dev/shm; 1 to 8 MiB.
 */
const chunkBytes = (worldSize: number) => Math.min(8, Math.max(1, Math.floor(48 / (2 * (worldSize + 1))))) * 2 ** 20;

/** Collectives on host values through the segment, run one at a time in call order; sums are f32, added in rank order. */
export interface SharedMemoryPlane {
  /** In place (resolving to the same array once summed), the same bits on every rank. */
  sum(values: Float32Array | Promise<Float32Array>, what: string): Promise<Float32Array>;
  /** In place: of worldSize chunks of `n` values, chunk `rank` becomes the ranks' sum of it (the same bits as `sum` puts there). */
  reduceScatterSum(values: Float32Array | Promise<Float32Array>, n: number, what: string): Promise<Float32Array>;
  /** In place: of worldSize chunks of `bytes` bytes, chunk r becomes rank r's. */
  allGather(data: Uint8Array | Promise<Uint8Array>, bytes: number, what: string): Promise<Uint8Array>;
  close(): void;
}

/**
 * Sets up the shared-memory segment of a run whose ranks all run on this
 * machine (same host name and boot id), through the star group: rank 0
 * creates it under a fresh name, every rank maps it, then the name is
 * unlinked (the mappings live on; nothing is left in /dev/shm if a rank dies).
 * Resolves to the plane, or to why not (ranks on several machines, the addon
 * missing, /dev/shm refusing): the caller then sums over TCP.
 */
export async function joinSharedMemory(group: StarGroup, timeoutMs: number): Promise<SharedMemoryPlane | { unavailable: string }> {
  const { rank, worldSize } = group;
  const addon = loadSharedMemory();
  const encode = (x: unknown) => new TextEncoder().encode(JSON.stringify(x));
  const decode = <T>(b: Uint8Array) => JSON.parse(new TextDecoder().decode(b)) as T;

  // Rank 0 decides from every rank's machine and addon, and names the segment.
  const here = { machine: machineId(), addon: addon instanceof Error ? addon.message : "" };
  const plan = decode<{ name?: string; unavailable?: string }>(
    await group.run("shared-memory plan", encode(here), (parts) => {
      const all = parts.map((p) => decode<typeof here>(p));
      const elsewhere = all.findIndex((p) => p.machine !== all[0].machine);
      const noAddon = all.find((p) => p.addon !== "");
      if (elsewhere >= 0) return encode({ unavailable: `rank ${elsewhere} runs on another machine than rank 0` });
      if (noAddon) return encode({ unavailable: noAddon.addon });
      return encode({ name: `/kiln-${process.pid}-${randomBytes(6).toString("hex")}` });
    }),
  );
  if (plan.name === undefined || addon instanceof Error) return { unavailable: plan.unavailable ?? "no shared-memory addon" };
  const name = plan.name;

  let handle: ShmGroupHandle | undefined;
  const tryOpen = (create: boolean): string => {
    try {
      handle = new addon.ShmGroup(name, rank, worldSize, chunkBytes(worldSize), create, timeoutMs);
      return "";
    } catch (err) {
      return (err as Error).message;
    }
  };
  // Rank 0 creates the segment before the others open it; then every rank says whether it mapped it.
  const created = decode<string>(await group.run("shared-memory segment", rank === 0 ? encode(tryOpen(true)) : encode(""), partOf(0)));
  const opened = rank === 0 || created !== "" ? created : tryOpen(false);
  const problems = decode<string[]>(await group.run("shared-memory mapping", encode(opened), (parts) => encode(parts.map((p) => decode<string>(p)))));
  if (rank === 0 && created === "") addon.ShmGroup.unlink(name);
  const failed = problems.findIndex((p) => p !== "");
  if (failed >= 0) {
    handle?.close();
    return { unavailable: `rank ${failed} could not map shared memory: ${problems[failed]}` };
  }
  const segment = handle!;
  group.onFailure(() => segment.abort());

  // One collective at a time, in call order (the segment has one set of slots).
  let tail: Promise<unknown> = Promise.resolve();
  const inTurn = <T>(input: T | Promise<T>, what: string, run: (x: T) => Promise<void>): Promise<T> => {
    const next = tail.then(async () => {
      const x = await input;
      await run(x).catch((err: Error) => {
        throw explain(err, what);
      });
      return x;
    });
    tail = next.catch(() => undefined);
    return next;
  };
  const explain = (err: Error, what: string): Error => {
    if (group.failed) return group.failed;
    const missing = /^missing:(\d+)/.exec(err.message);
    if (missing) {
      const culprit = Number(missing[1]);
      return new TrainingError(`rank ${culprit} did not reach ${what} within ${timeoutMs / 1000} s: it stalled, is far behind, or runs different code`, {
        where: `data-parallel rank ${culprit} of ${worldSize}, seen by rank ${rank}`,
        hint: `see rank ${culprit}'s own output for why it stopped; checkpoints written so far are complete, and --resume auto continues from the newest`,
      });
    }
    return new TrainingError(`${what} through shared memory failed: ${err.message}`, { where: `data-parallel rank ${rank} of ${worldSize}` });
  };
  return {
    sum: (values, what) => inTurn(values, what, (x) => segment.allReduceSum(x)),
    reduceScatterSum: (values, n, what) => inTurn(values, what, (x) => segment.reduceScatterSum(x, n)),
    allGather: (data, bytes, what) => inTurn(data, what, (x) => segment.allGather(x, bytes)),
    close() {
      segment.close();
    },
  };
}

/** This machine, as ranks compare it: host name and boot id (two containers may share a host name). */
function machineId(): string {
  let boot = "";
  try {
    boot = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    // not Linux: the host name alone
  }
  return `${os.hostname()} ${boot}`;
}
