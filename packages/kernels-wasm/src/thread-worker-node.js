// Entry point of a kernel worker in Node (worker_threads); the loop is in thread-worker-loop.js.
// Where the pool runs native kernels, this worker loads the same addon file as the calling
// thread (a Node-API addon loads once per thread) and serves its entry points too.
import { createRequire } from "node:module";
import { parentPort } from "node:worker_threads";
import { nativeEntries } from "./native-entries.js";
import { serveKernels } from "./thread-worker-loop.js";

/** @param {import("./dispatch-control.js").WorkerInit} init */
const nativeKernels = (init) => (init.native ? nativeEntries(createRequire(import.meta.url)(init.native.path).kernels(init.native.isa), init.memory) : {});

parentPort.once("message", (init) => serveKernels(init, parentPort, nativeKernels));
