import { describe, expect, it } from "vitest";
import { BYTES_PER_EXTRA_THREAD, NODE_RUNTIME_BYTES, formatProcessPeak, processPeak } from "../src/estimate/process-peak.js";

describe("processPeak", () => {
  it("counts the plan on the CPU (its device memory is the process's), the runtime, the extra kernel threads and the batches", () => {
    const p = processPeak({ planned: 100 * 2 ** 20, planOnHost: true, threads: 4, batchSize: 8, seqLen: 256, prefetch: 2 });
    expect(p.bytes).toBe(100 * 2 ** 20 + NODE_RUNTIME_BYTES + 3 * BYTES_PER_EXTRA_THREAD + 4 * 8 * 8 * 256);
    expect(formatProcessPeak(p, 4)).toMatch(/^~\d+ MiB RSS expected for the process: the plan 100 MiB \(host memory\), the Node runtime 129 MiB, 3 more kernel threads 27\.0 MiB, batches 64\.0 KiB$/);
  });

  it("leaves a GPU's plan out of the host's peak, and says what it does not count", () => {
    const p = processPeak({ planned: 10 * 2 ** 30, planOnHost: false, threads: 132, batchSize: 1, seqLen: 1024, prefetch: 2 });
    expect(p.bytes).toBe(NODE_RUNTIME_BYTES + 4 * 8 * 1024);
    expect(formatProcessPeak(p, 132)).toMatch(/the plan on the device, the Node runtime 129 MiB, batches 32\.0 KiB; the GPU runtime's own host memory is not counted$/);
  });
});
