import type { NativeAddonLoad } from "./native-addon-types.js";

/** A started kernel worker, as the pool drives it (worker_threads in Node, a module Web Worker in browsers). */
export interface KernelWorker {
  post(message: unknown): void;
  on(handler: (message: { type: string; threadIndex: number; message?: string }) => void): void;
  exited: Promise<void>;
  terminate(): void;
  /** Whether a live worker keeps a Node process running (it must while we await it). */
  keepAlive(on: boolean): void;
}

/**
 * What differs between Node and browsers. "#platform" (package.json "imports")
 * resolves to platform-node.ts under the "node" condition and to
 * platform-browser.ts elsewhere, so a browser bundle holds no `node:` import.
 */
export interface Platform {
  /** Logical cores: os.availableParallelism() in Node, navigator.hardwareConcurrency in browsers. */
  coreCount(): number;
  /** The bytes at `url`, or undefined when nothing is there. */
  readBytes(url: URL): Promise<Uint8Array | ArrayBuffer | undefined>;
  /** Turns on an engine flag that makes relaxed SIMD validate, where one exists (Node 20's V8). */
  enableRelaxedSimd(): void;
  /** Starts one kernel worker. */
  spawnWorker(): KernelWorker;
  /** The native kernels' addon (Node, where it was built), or why there is none (browsers: never). */
  loadNativeAddon(): NativeAddonLoad;
  /** An environment variable (Node's process.env); undefined in browsers. */
  env(name: string): string | undefined;
}
