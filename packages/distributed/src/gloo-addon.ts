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
  barrier(): Promise<void>;
  close(): void;
}

interface GlooAddon {
  GlooGroup: new (rank: number, worldSize: number, where: { hostname: string } | { iface: string }, timeoutMs: number) => GlooGroupHandle;
}

export type GlooStatus = { available: true; path: string } | { available: false; reason: string };

const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Where the Gloo addon is: KILN_GLOO_ADDON, else the package's own build. */
function addonPath(): string {
  return process.env.KILN_GLOO_ADDON || `${PACKAGE_ROOT}build/Release/kiln_gloo.node`;
}

let loaded: GlooAddon | Error | undefined;

function load(): GlooAddon | Error {
  if (loaded) return loaded;
  const file = addonPath();
  if (!fs.existsSync(file)) {
    let reason = "the Gloo addon of @kiln/distributed is not built";
    try {
      const info = JSON.parse(fs.readFileSync(`${PACKAGE_ROOT}build/build-info.json`, "utf8")) as { reason?: string };
      if (info.reason) reason = info.reason;
    } catch {
      reason += " (install libgloo-dev, then run 'pnpm --filter @kiln/distributed build')";
    }
    return (loaded = new Error(reason));
  }
  try {
    loaded = createRequire(import.meta.url)(file) as GlooAddon;
  } catch (err) {
    loaded = new Error(`the Gloo addon at ${file} does not load: ${(err as Error).message} (is libgloo installed? Debian: libgloo0)`);
  }
  return loaded;
}

/** Whether the `gloo` sync backend can run here, and why not. */
export function glooStatus(): GlooStatus {
  const a = load();
  return a instanceof Error ? { available: false, reason: a.message } : { available: true, path: addonPath() };
}

/** The addon, or a ConfigError saying what is missing. */
export function loadGloo(): GlooAddon {
  const a = load();
  if (a instanceof Error) {
    throw new ConfigError(`the gloo sync backend is not available: ${a.message}`, {
      where: "--sync-backend gloo",
      hint: "install Gloo (sudo apt-get install libgloo-dev) and rebuild @kiln/distributed, or use --sync-backend cpu",
    });
  }
  return a;
}
