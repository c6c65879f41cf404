import type { Backend } from "@kiln/contract";
import { describe, it } from "vitest";
import { backendsByThreadCount, expectSameBits, SCAN_DIMS, ScanBuffers } from "./support/scan-determinism.js";

// ssdScanBackward's dDtBias, dALog and dD are sums over (batch, time): each (batch, head)
// sums its own in a fixed order and the partials are added over the batch in order, once,
// so repeated calls, and 1 or 2 threads, give the same bits (and so do dX, dDt, dB, dC,
// y and the saved states, each written by one thread).
describe("ssdScan results are deterministic", () => {
  const backends = backendsByThreadCount();

  async function run(backend: Backend): Promise<string> {
    const bufs = new ScanBuffers(backend);
    const { dY, y, states, ...inputs } = bufs.ssdInputs();
    backend.kernels.ssdScanForward({ ...SCAN_DIMS, ...inputs, y, states, dtype: "f32" });
    const grads = bufs.ssdGrads();
    backend.kernels.ssdScanBackward({ ...SCAN_DIMS, ...inputs, dY, states, ...grads, dtype: "f32" });
    return bufs.bits([y, states, ...Object.values(grads)]);
  }

  it("bit-identical outputs and parameter gradients over repeated calls and thread counts", () => expectSameBits(backends, run));
});
