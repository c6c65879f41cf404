import type { Backend, BufferHandle } from "@kiln/contract";
import { afterAll, beforeAll, expect } from "vitest";
import { createWasmBackend } from "../../src/index.js";
import { BackendBuffers } from "./backend-buffers.js";

/** The shape of the scans' determinism tests: five chunks (the last one short), two groups, rows with gaps. */
export const SCAN_DIMS = { batch: 3, seqLen: 77, heads: 4, headDim: 12, groups: 2, stateSize: 10, chunkSize: 16, xRowStride: 53, dtRowStride: 6, bcRowStride: 23 };

/** n values in [lo, hi], a sine of the index: one curve per seed. */
export const wave = (seed: number, n: number, lo = -1.5, hi = 1.5) =>
  Float32Array.from({ length: n }, (_, i) => lo + ((Math.sin((i + 1) * seed) + 1) / 2) * (hi - lo));

/** Wasm backends with 1 and with 2 threads, opened before the enclosing describe block's tests, disposed after. */
export function backendsByThreadCount(): Backend[] {
  const backends: Backend[] = [];
  beforeAll(async () => {
    for (const threads of [1, 2]) backends.push(await createWasmBackend({ threads, minFlopsPerThread: 0, measurePeak: false }));
  });
  afterAll(() => backends.forEach((b) => b.dispose()));
  return backends;
}

/** One scan call's f32 buffers on a backend (SCAN_DIMS), all freed by `bits`. */
export class ScanBuffers {
  private readonly buffers: BackendBuffers;
  readonly rows = SCAN_DIMS.batch * SCAN_DIMS.seqLen;

  constructor(private readonly backend: Backend) {
    this.buffers = new BackendBuffers(() => backend);
  }

  buf(data: Float32Array): BufferHandle {
    return this.buffers.upload(data);
  }

  zeros(n: number): BufferHandle {
    return this.buf(new Float32Array(n));
  }

  /** What Mamba2's and Mamba3's forwards read, and dY; y and states zeroed for the forward to write. */
  ssdInputs() {
    const { rows } = this, { heads, headDim, stateSize, xRowStride, dtRowStride, bcRowStride } = SCAN_DIMS;
    return {
      x: this.buf(wave(1.7, rows * xRowStride)),
      dt: this.buf(wave(0.37, rows * dtRowStride, -4, 1)),
      B: this.buf(wave(0.9, rows * bcRowStride)),
      C: this.buf(wave(2.3, rows * bcRowStride)),
      dtBias: this.buf(wave(2.9, heads, -1, 0.5)),
      aLog: this.buf(wave(1.3, heads, -1, 1.5)),
      D: this.buf(wave(3.1, heads)),
      dY: this.buf(wave(0.61, rows * heads * headDim)),
      y: this.zeros(rows * heads * headDim),
      states: this.zeros(SCAN_DIMS.batch * heads * Math.ceil(SCAN_DIMS.seqLen / SCAN_DIMS.chunkSize) * headDim * stateSize),
    };
  }

  /** The gradients both backwards write: dX, dDt, dB, dC zeroed; dDtBias, dALog, dD (which accumulate) not 0. */
  ssdGrads() {
    const { rows } = this, { heads } = SCAN_DIMS;
    return {
      dX: this.zeros(rows * SCAN_DIMS.xRowStride),
      dDt: this.zeros(rows * SCAN_DIMS.dtRowStride),
      dB: this.zeros(rows * SCAN_DIMS.bcRowStride),
      dC: this.zeros(rows * SCAN_DIMS.bcRowStride),
      dDtBias: this.buf(new Float32Array(heads).fill(0.25)),
      dALog: this.buf(new Float32Array(heads).fill(-0.5)),
      dD: this.buf(new Float32Array(heads).fill(1.5)),
    };
  }

  /** The words of `outs`, joined (each expected to hold a nonzero one); then every buffer is freed. */
  async bits(outs: BufferHandle[]): Promise<string> {
    const parts: string[] = [];
    for (const h of outs) {
      const out = new Uint32Array(h.byteLength / 4);
      await this.backend.download(h, out);
      parts.push(out.join(","));
    }
    this.buffers.freeAll();
    expect(parts.every((p) => p.length > 0 && !p.split(",").every((w) => w === "0"))).toBe(true);
    return parts.join("|");
  }
}

/** `run` three times on each backend: one result expected. */
export async function expectSameBits(backends: Backend[], run: (backend: Backend) => Promise<string>): Promise<void> {
  const results: string[] = [];
  for (const backend of backends) for (let i = 0; i < 3; i++) results.push(await run(backend));
  expect(new Set(results).size).toBe(1);
}
