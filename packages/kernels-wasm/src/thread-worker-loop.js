// The loop of one kernel worker, shared by thread-worker-node.js (worker_threads)
// and thread-worker-browser.js (a module Web Worker). It instantiates the shared
// WebAssembly.Module on the shared memory with its own stack, then loops: wait
// for a new generation in the control block, join the call if it is still open,
// take parts of it until none is left, leave. The message it receives is
// described by WorkerInit in dispatch-control.ts; the protocol by CONTROL there.
import { SpinWait } from "./spin-wait.js";

/**
 * @typedef {{ postMessage(message: unknown): void, close(): void }} WorkerPort
 * @typedef {(init: import("./dispatch-control.js").WorkerInit) => Record<string, Function>} ExtraKernels
 */

/**
 * Runs kernels until told to stop, then closes `port`.
 * @param {import("./dispatch-control.js").WorkerInit} init
 * @param {WorkerPort} port
 * @param {ExtraKernels | undefined} extraKernels  entry points that are not the module's (the native ones in Node)
 */
function serve(init, port, extraKernels) {
  const { layout: L, threadIndex, closedFlag: CLOSED } = init;
  const instance = new WebAssembly.Instance(init.module, { env: { memory: init.memory } });
  instance.exports.__stack_pointer.value = init.stackTop;
  const extra = extraKernels ? extraKernels(init) : {};
  const kernels = init.kernelNames.map((name) => {
    const kernel = instance.exports[name] ?? extra[name];
    if (typeof kernel !== "function") throw new Error(`this worker has no kernel ${name}`);
    return kernel;
  });
  const control = new Int32Array(init.control);
  const waiter = new SpinWait(init.spinMicroseconds / 1000);
  // Read the generation before saying ready: the caller may start a call as
  // soon as it hears from every worker, and that call must look new here.
  let seen = Atomics.load(control, L.GENERATION);
  port.postMessage({ type: "ready", threadIndex });
  for (;;) {
    seen = waiter.waitWhile(control, L.GENERATION, seen);
    if (Atomics.load(control, L.KERNEL) < 0) break;
    // Join while the call is open. A worker late enough to find a later call open joins
    // that one: the call's slots are written before it opens and stay until it closes.
    let state = Atomics.load(control, L.STATE);
    while (!(state & CLOSED)) {
      const was = Atomics.compareExchange(control, L.STATE, state, state + 1);
      if (was === state) break;
      state = was;
    }
    if (state & CLOSED) continue;
    seen = Atomics.load(control, L.GENERATION);
    const kernel = kernels[Atomics.load(control, L.KERNEL)];
    const args = Atomics.load(control, L.ARGS);
    const parts = Atomics.load(control, L.ACTIVE);
    for (let part; (part = Atomics.add(control, L.NEXT_PART, 1)) < parts; ) {
      try {
        kernel(args, part, parts);
      } catch (error) {
        Atomics.store(control, L.FAILED, threadIndex + 1);
        port.postMessage({ type: "error", threadIndex, message: String(error?.stack ?? error) });
        break;
      }
    }
    if (Atomics.sub(control, L.STATE, 1) === (CLOSED | 1)) Atomics.notify(control, L.STATE);
  }
  port.postMessage({ type: "exited", threadIndex });
  port.close();
}

/**
 * Serves the first message `port` receives; a failure to start is reported, not thrown.
 * @param {import("./dispatch-control.js").WorkerInit} init
 * @param {WorkerPort} port
 * @param {ExtraKernels} [extraKernels]
 */
export function serveKernels(init, port, extraKernels) {
  try {
    serve(init, port, extraKernels);
  } catch (error) {
    port.postMessage({ type: "failed", threadIndex: init?.threadIndex, message: String(error?.stack ?? error) });
  }
}
