// The page's training worker: the kernels, the trainer and generation run here, so the
// page stays responsive (and, cross-origin isolated, the kernels' threads may block
// in Atomics.wait, which a page's main thread may not).
import { createWasmBackend } from "@kiln/kernels-wasm";
import type { FromWorker, ToWorker } from "./messages.js";
import { PageTraining } from "./page-training.js";

const scope = self as unknown as {
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  onmessage: ((event: MessageEvent<ToWorker>) => void) | null;
};
const post = (message: FromWorker, transfer: Transferable[] = []) => scope.postMessage(message, transfer);

function postError(err: unknown): void {
  const e = err as Error & { where?: string; hint?: string };
  post({ type: "error", name: e?.name ?? "Error", message: e?.message ?? String(err), ...(e?.where ? { where: e.where } : {}), ...(e?.hint ? { hint: e.hint } : {}) });
}

const isolated = globalThis.crossOriginIsolated === true;
// Every core when the page is cross-origin isolated; one thread otherwise (no SharedArrayBuffer).
const training = createWasmBackend({ measurePeak: false, ...(isolated ? {} : { threads: 1 }) }).then((backend) => {
  const device = backend.capabilities().device;
  const threads = device.parallelism ?? 1;
  post({
    type: "device",
    name: device.name,
    threads,
    isolated,
    why: isolated
      ? `the page is cross-origin isolated (COOP/COEP headers), so ${threads} threads share the model's memory`
      : "the page is not cross-origin isolated (it was served without Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp), so SharedArrayBuffer is unavailable and the kernels run on one thread",
  });
  return new PageTraining(backend, post);
});
training.catch(postError);

scope.onmessage = ({ data: m }) => {
  training
    .then((t) => {
      switch (m.type) {
        case "start":
          return t.start(m.config, m.data, m.steps);
        case "pause":
          return t.pause();
        case "resume":
          return t.resume();
        case "sample":
          return t.sample(m.request);
        case "checkpoint":
          return t.checkpoint();
        case "load":
          return t.load(m.name, m.bytes, m.data);
      }
    })
    .catch(postError);
};
