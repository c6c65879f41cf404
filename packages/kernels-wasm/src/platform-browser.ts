import type { KernelWorker, Platform } from "./platform-types.js";

function spawnWorker(): KernelWorker {
  // One expression, as Vite and webpack recognise a worker (they bundle it and rewrite the URL; Rollup's
  // importMetaAssets copies the file, which is already one bundle).
  const worker = new Worker(new URL("./thread-worker-browser.js", import.meta.url), { type: "module" });
  let exit: () => void = () => {};
  const exited = new Promise<void>((resolve) => (exit = resolve));
  return {
    post: (m) => worker.postMessage(m),
    on: (h) => {
      worker.addEventListener("message", (e: MessageEvent) => {
        if (e.data?.type === "exited") exit();
        h(e.data);
      });
      // A script that fails to load (404, a wrong MIME type, blocked by COEP) never answers: say so.
      worker.addEventListener("error", (e: ErrorEvent) => {
        e.preventDefault();
        h({
          type: "failed",
          threadIndex: -1,
          message:
            e.message ||
            "could not load the kernel worker script as a module Worker (missing, not served as JavaScript, or " +
              "served without Cross-Origin-Embedder-Policy to a cross-origin isolated page)",
        });
      });
    },
    exited,
    terminate: () => {
      worker.terminate();
      exit();
    },
    keepAlive: () => {},
  };
}

export const platform: Platform = {
  coreCount: () => (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency ?? 1,
  async readBytes(url) {
    const response = await fetch(url);
    if (response.status === 404) return undefined;
    if (!response.ok) throw new Error(`HTTP ${response.status} for ${url.href}`);
    return response.arrayBuffer();
  },
  enableRelaxedSimd() {},
  spawnWorker,
  loadNativeAddon: () => ({ reason: "native kernels run in Node only" }),
  env: () => undefined,
};
