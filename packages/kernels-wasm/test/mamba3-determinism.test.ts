import type { Backend } from "@kiln/contract";
import { describe, it } from "vitest";
import { backendsByThreadCount, expectSameBits, SCAN_DIMS, ScanBuffers, wave } from "./support/scan-determinism.js";

// mamba3ScanBackward's dBBias, dCBias, dDtBias, dALog and dD are sums over (batch, time):
// each (batch, head) sums its own in a fixed order and the partials are added over the
// batch in order, once, so repeated calls, and 1 or 2 threads, give the same bits (and so
// do dX, dDt, dLambda, dTheta, dB, dC, y and the saved states, each written by one thread).
describe("mamba3Scan results are deterministic", () => {
  const backends = backendsByThreadCount();

  async function run(backend: Backend, rotates: boolean): Promise<string> {
    const bufs = new ScanBuffers(backend);
    const { rows } = bufs, { heads, stateSize } = SCAN_DIMS;
    const { dY, y, states, ...ssd } = bufs.ssdInputs();
    const inputs = {
      ...ssd,
      lambda: bufs.buf(wave(0.73, rows * heads, -4, 4)),
      ...(rotates ? { theta: bufs.buf(wave(1.1, (rows * heads * stateSize) / 2, -0.5, 0.5)) } : {}),
      bBias: bufs.buf(wave(0.41, heads * stateSize)),
      cBias: bufs.buf(wave(0.53, heads * stateSize)),
    };
    backend.kernels.mamba3ScanForward({ ...SCAN_DIMS, ...inputs, y, states, dtype: "f32" });
    const grads = {
      ...bufs.ssdGrads(),
      dLambda: bufs.zeros(rows * heads),
      ...(rotates ? { dTheta: bufs.zeros((rows * heads * stateSize) / 2) } : {}),
      dBBias: bufs.buf(new Float32Array(heads * stateSize).fill(0.75)),
      dCBias: bufs.buf(new Float32Array(heads * stateSize).fill(-0.25)),
    };
    backend.kernels.mamba3ScanBackward({ ...SCAN_DIMS, ...inputs, dY, states, ...grads, dtype: "f32" });
    return bufs.bits([y, states, ...Object.values(grads)]);
  }

  for (const rotates of [true, false]) {
    it(`bit-identical outputs and parameter gradients over repeated calls and thread counts${rotates ? ", with the rotation" : ""}`, () =>
      expectSameBits(backends, (backend) => run(backend, rotates)));
  }
});
