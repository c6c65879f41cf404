// The loop of one kernel worker, shared by thread-worker-node.js (worker_threads)
// and thread-worker-browser.js (a module Web Worker). It instantiates the shared
// WebAssembly.Module on the shared memory with its own stack, then loops: wait
// for a new generation in the control block, run its share of the kernel, count
// itself done. The message it receives is described by WorkerInit in dispatch-control.ts.

/**
 * @typedef {{ postMessage(message: unknown): void, close(): void }} WorkerPort
 */

/**
 * Runs kernels until told to stop, then closes `port`.
 * @param {import("./dispatch-control.js").WorkerInit} init
 * @param {WorkerPort} port
 */
function serve(init, port) {
  const { layout: L, threadIndex, spinIterations } = init;
  const instance = new WebAssembly.Instance(init.module, { env: { memory: init.memory } });
  instance.exports.__stack_pointer.value = init.stackTop;
  const kernels = init.kernelNames.map((name) => instance.exports[name]);
  const control = new Int32Array(init.control);
  // Read the generation before saying ready: the caller may start a call as
  // soon as it hears from every worker, and that call must look new here.
  let seen = Atomics.load(control, L.GENERATION);
  port.postMessage({ type: "ready", threadIndex });
  for (;;) {
    let generation = Atomics.load(control, L.GENERATION);
    for (let i = 0; generation === seen && i < spinIterations; i++) generation = Atomics.load(control, L.GENERATION);
    while (generation === seen) {
      Atomics.wait(control, L.GENERATION, seen);
      generation = Atomics.load(control, L.GENERATION);
    }
    seen = generation;
    const kernel = Atomics.load(control, L.KERNEL);
    if (kernel < 0) break;
    const active = Atomics.load(control, L.ACTIVE);
    if (threadIndex >= active) continue;
    try {
      kernels[kernel](Atomics.load(control, L.ARGS), threadIndex, active);
    } catch (error) {
      Atomics.store(control, L.FAILED, threadIndex + 1);
      port.postMessage({ type: "error", threadIndex, message: String(error?.stack ?? error) });
    }
    if (Atomics.sub(control, L.REMAINING, 1) === 1) Atomics.notify(control, L.REMAINING);
  }
  port.postMessage({ type: "exited", threadIndex });
  port.close();
}

/**
 * Serves the first message `port` receives; a failure to start is reported, not thrown.
 * @param {import("./dispatch-control.js").WorkerInit} init
 * @param {WorkerPort} port
 */
export function serveKernels(init, port) {
  try {
    serve(init, port);
  } catch (error) {
    port.postMessage({ type: "failed", threadIndex: init?.threadIndex, message: String(error?.stack ?? error) });
  }
}
