// Runs in the page and gives the test kilnConformance(). A browser main thread
// may not block in Atomics.wait, so multi-threaded runs go to a module Worker.
import { runConformanceHere } from "./conformance-run.js";
import type { RunReport, RunRequest } from "./run-report.js";

type WorkerReply = { report: RunReport } | { error: string };

function runInWorker(request: RunRequest): Promise<RunReport> {
  const worker = new Worker(new URL("./conformance-worker.js", import.meta.url), { type: "module" });
  return new Promise<RunReport>((resolve, reject) => {
    worker.addEventListener("message", (e: MessageEvent<WorkerReply>) => {
      worker.terminate();
      if ("error" in e.data) reject(new Error(e.data.error));
      else resolve(e.data.report);
    });
    worker.addEventListener("error", (e: ErrorEvent) => {
      worker.terminate();
      reject(new Error(`the conformance worker failed: ${e.message || "it did not load"}`));
    });
    worker.postMessage(request);
  });
}

async function kilnConformance(request: RunRequest): Promise<RunReport> {
  const report = request.on === "worker" ? await runInWorker(request) : await runConformanceHere(request);
  return { ...report, pageIsolated: globalThis.crossOriginIsolated === true };
}

(globalThis as unknown as { kilnConformance: typeof kilnConformance }).kilnConformance = kilnConformance;
