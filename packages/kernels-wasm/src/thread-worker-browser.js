// Entry point of a kernel worker in a browser (a module Web Worker); the loop is in thread-worker-loop.js.
import { serveKernels } from "./thread-worker-loop.js";

globalThis.addEventListener("message", (e) => serveKernels(e.data, { postMessage: (m) => globalThis.postMessage(m), close: () => globalThis.close() }), {
  once: true,
});
