// A module Worker of the page that runs one conformance run per message.
import { runConformanceHere } from "./conformance-run.js";
import type { RunRequest } from "./run-report.js";

const scope = globalThis as unknown as {
  addEventListener(type: "message", listener: (e: { data: RunRequest }) => void): void;
  postMessage(message: unknown): void;
};

scope.addEventListener("message", (e) => {
  runConformanceHere(e.data).then(
    (report) => scope.postMessage({ report }),
    (error: unknown) => scope.postMessage({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});
