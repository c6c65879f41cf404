import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { setFlagsFromString } from "node:v8";
import { Worker } from "node:worker_threads";
import { loadNativeAddon } from "./native-addon-node.js";
import type { KernelWorker, Platform } from "./platform-types.js";

function spawnWorker(): KernelWorker {
  // execArgv: [] so that the parent's flags (`--input-type=module -e`, `--test`,
  // `--import x`) never reach a worker, where some of them are refused at start.
  const worker = new Worker(new URL("./thread-worker-node.js", import.meta.url), { execArgv: [] });
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  return {
    post: (m) => worker.postMessage(m),
    on: (h) => {
      worker.on("message", h);
      worker.on("error", (e) => h({ type: "failed", threadIndex: -1, message: String(e?.stack ?? e) }));
    },
    exited,
    terminate: () => void worker.terminate(),
    keepAlive: (on) => (on ? worker.ref() : worker.unref()),
  };
}

export const platform: Platform = {
  coreCount: () => availableParallelism(),
  async readBytes(url) {
    try {
      return await readFile(url);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  },
  enableRelaxedSimd() {
    try {
      setFlagsFromString("--experimental-wasm-relaxed-simd");
    } catch {
      // Flags locked: the validation probe decides.
    }
  },
  spawnWorker,
  loadNativeAddon,
  env: (name) => process.env[name],
};
