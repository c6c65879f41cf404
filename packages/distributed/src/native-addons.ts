import fs from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { ConfigError } from "@kiln/contract";

/** One process's place in a Gloo full mesh (csrc/gloo_group.cc). */
export interface GlooGroupHandle {
  /** This rank's listening address for each peer, to hand to every other rank's connect(). */
  addresses(): Uint8Array;
  /** Connects to every peer, given each rank's addresses() by rank. */
  connect(everyRank: Uint8Array[]): Promise<void>;
  /** In place: the sum over the ranks (ring all-reduce: the same bits on every rank). */
  allReduceSum(values: Float32Array | Float64Array): Promise<void>;
  /** In place: rank `root`'s bytes on every rank. */
  broadcast(bytes: Uint8Array, root: number): Promise<void>;
  /** In place: chunk `rank` of the values (worldSize chunks of n) becomes the ranks' f32 sum of it (a ring: deterministic, not in rank order). */
  reduceScatterSum(values: Float32Array, n: number): Promise<void>;
  /** In place: chunk r of the bytes (worldSize chunks of `bytes`) becomes rank r's (gloo::allgather). */
  allGather(data: Uint8Array, bytes: number): Promise<void>;
  barrier(): Promise<void>;
  close(): void;
}

/** One process's mapping of a run's shared-memory segment (csrc/shm_group.cc). */
export interface ShmGroupHandle {
  /** In place: the f32 sum over the ranks, added in rank order. Rejects with "missing:<ranks>" after the timeout, or "aborted". */
  allReduceSum(values: Float32Array): Promise<void>;
  /** In place: chunk `rank` of the values (worldSize chunks of n) becomes the ranks' f32 sum of it, added in rank order; the other chunks are left as they are. */
  reduceScatterSum(values: Float32Array, n: number): Promise<void>;
  /** In place: chunk r of the bytes (worldSize chunks of `bytes`) becomes rank r's. */
  allGather(data: Uint8Array, bytes: number): Promise<void>;
  /** Fails the collective in progress and every later one at once. */
  abort(): void;
  close(): void;
}

interface Addons {
  gloo: { GlooGroup: new (rank: number, worldSize: number, where: { hostname: string } | { iface: string }, timeoutMs: number) => GlooGroupHandle };
  shm: {
    ShmGroup: { new (name: string, rank: number, worldSize: number, chunkBytes: number, create: boolean, timeoutMs: number): ShmGroupHandle; unlink(name: string): void };
  };
}
type AddonKind = keyof Addons;

export type AddonStatus = { available: true; path: string } | { available: false; reason: string };
export type GlooStatus = AddonStatus;

const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));
const ENV: Record<AddonKind, string> = { gloo: "KILN_GLOO_ADDON", shm: "KILN_SHM_ADDON" };

/** Where an addon is: KILN_GLOO_ADDON / KILN_SHM_ADDON, else the package's own build. */
function addonPath(kind: AddonKind): string {
  return process.env[ENV[kind]] || `${PACKAGE_ROOT}build/Release/kiln_${kind}.node`;
}

const loaded = new Map<AddonKind, unknown>();

function load<K extends AddonKind>(kind: K): Addons[K] | Error {
  if (loaded.has(kind)) return loaded.get(kind) as Addons[K] | Error;
  const file = addonPath(kind);
  let result: Addons[K] | Error;
  if (!fs.existsSync(file)) {
    let reason = `the ${kind} addon of @kiln/distributed is not built (run 'pnpm --filter @kiln/distributed build')`;
    try {
      const info = JSON.parse(fs.readFileSync(`${PACKAGE_ROOT}build/build-info.json`, "utf8")) as Partial<Record<AddonKind, { reason?: string }>>;
      reason = info[kind]?.reason ?? reason;
    } catch {
      // no build yet: the default reason says what to run
    }
    result = new Error(reason);
  } else {
    try {
      result = createRequire(import.meta.url)(file) as Addons[K];
    } catch (err) {
      result = new Error(`the ${kind} addon at ${file} does not load: ${(err as Error).message}${kind === "gloo" ? " (is Gloo installed? Debian: libgloo0)" : ""}`);
    }
  }
  loaded.set(kind, result);
  return result;
}

function status(kind: AddonKind): AddonStatus {
  const a = load(kind);
  return a instanceof Error ? { available: false, reason: a.message } : { available: true, path: addonPath(kind) };
}

/** Whether the `gloo` sync backend can run here, and why not. */
export function glooStatus(): GlooStatus {
  return status("gloo");
}

/** Whether ranks on this machine can all-reduce through shared memory, and why not. */
export function sharedMemoryStatus(): AddonStatus {
  return status("shm");
}

/** The Gloo addon, or a ConfigError saying what is missing. */
export function loadGloo(): Addons["gloo"] {
  const a = load("gloo");
  if (a instanceof Error) {
    throw new ConfigError(`the gloo sync backend is not available: ${a.message}`, {
      where: "--sync-backend gloo",
      hint: "install Gloo (sudo apt-get install libgloo-dev) and rebuild @kiln/distributed, or use --sync-backend cpu",
    });
  }
  return a;
}

/** The shared-memory addon, or the Error saying why it is not there. */
export function loadSharedMemory(): Addons["shm"] | Error {
  return load("shm");
}
