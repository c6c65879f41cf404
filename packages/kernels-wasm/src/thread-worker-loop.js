// Entry point of one kernel worker (worker_threads in Node, a module Web
// Worker in browsers). It instantiates the shared WebAssembly.Module on the
// shared memory with its own stack, then loops: wait for a new generation in
// the control block, run its share of the kernel, count itself done.
// The message it receives is described by WorkerInit in dispatch-control.ts.

const isNode = typeof process !== "undefined" && typeof process.versions?.node === "string";
const port = isNode ? (await import("node:worker_threads")).parentPort : globalThis;

/** @param {(msg: any) => void} handler */
function onFirstMessage(handler) {
  if (isNode) port.once("message", handler);
  else globalThis.addEventListener("message", (e) => handler(e.data), { once: true });
}

/** @param {import("./dispatch-control.js").WorkerInit} init */
function serve(init) {
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
  if (isNode) port.close();
  else globalThis.close();
}

onFirstMessage((init) => {
  try {
    serve(init);
  } catch (error) {
    port.postMessage({ type: "failed", threadIndex: init?.threadIndex, message: String(error?.stack ?? error) });
  }
});
