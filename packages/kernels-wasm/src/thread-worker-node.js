// Entry point of a kernel worker in Node (worker_threads); the loop is in thread-worker-loop.js.
import { parentPort } from "node:worker_threads";
import { serveKernels } from "./thread-worker-loop.js";

parentPort.once("message", (init) => serveKernels(init, parentPort));
