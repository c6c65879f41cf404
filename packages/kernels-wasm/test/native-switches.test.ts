import fs from "node:fs";
import { type Backend, DeviceError } from "@kiln/contract";
import { describe, expect, it } from "vitest";
import { createKernels, createWasmBackend, F32Buffer } from "../src/index.js";
import { writeMatmulArgs } from "../src/matmul-call.js";
import { nativeMatmulCalls } from "../src/matmul-dispatch.js";
import { randomArray } from "./reference-matmul.js";
import { NATIVE_KERNELS, nativeIsas, nativeSkipReason, withEnv } from "./support/native.js";

// How the native matmul is turned on and off and what the backend says about it; that it
// reads operands the memory grew to hold; that it refuses an argument block pointing
// outside the memory; and that the browser bundle holds none of it.

const skip = nativeSkipReason();

/** One f32 matmul of seeded operands (m x k times k x n); C's bytes, and whether it ran natively. */
async function matmulOnce(backend: Backend, m: number, n: number, k: number): Promise<{ c: Uint8Array; native: boolean }> {
  const a = backend.alloc(4 * m * k), b = backend.alloc(4 * k * n), c = backend.alloc(4 * m * n);
  try {
    backend.upload(a, randomArray(m * k, 7));
    backend.upload(b, randomArray(k * n, 8));
    const before = nativeMatmulCalls();
    backend.kernels.matmul({ a, b, c, m, n, k, dtype: "f32" });
    const out = new Uint8Array(4 * m * n);
    await backend.download(c, out);
    return { c: out, native: nativeMatmulCalls() === before + 1 };
  } finally {
    for (const x of [a, b, c]) backend.free(x);
  }
}

describe.skipIf(skip !== undefined)(`native matmul switches${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("runs natively by default, on the best instruction set, and says so", async () => {
    const backend = await createWasmBackend({ threads: 2, measurePeak: false });
    try {
      const device = backend.capabilities().device;
      expect(device.native).toEqual({ kernels: NATIVE_KERNELS, isa: nativeIsas()[0] });
      expect(device.name).toContain(`native matmul, attention, gelu, layerNorm, rmsNorm, crossEntropy (${nativeIsas()[0]})`);
      expect((await matmulOnce(backend, 40, 50, 60)).native).toBe(true);
    } finally {
      backend.dispose();
    }
  });

  it("KILN_NATIVE=0 runs the WebAssembly kernel, exactly as native: false does, and says why", async () => {
    for (const [env, options, reason] of [
      [{ KILN_NATIVE: "0" }, {}, "KILN_NATIVE=0"],
      [{}, { native: false }, "native: false"],
    ] as const) {
      const backend = await withEnv(env, () => createWasmBackend({ threads: 2, measurePeak: false, ...options }));
      try {
        const device = backend.capabilities().device;
        expect(device.native).toEqual({ kernels: [], reason });
        expect(device.name).not.toContain("native");
        expect((await matmulOnce(backend, 40, 50, 60)).native).toBe(false);
      } finally {
        backend.dispose();
      }
    }
  });

  it("KILN_NATIVE_ISA picks the instruction set and refuses one it does not know", async () => {
    for (const isa of nativeIsas()) {
      const backend = await withEnv({ KILN_NATIVE_ISA: isa }, () => createWasmBackend({ threads: 1, measurePeak: false }));
      expect(backend.capabilities().device.native?.isa).toBe(isa);
      backend.dispose();
    }
    await expect(withEnv({ KILN_NATIVE_ISA: "sse2" }, () => createWasmBackend({ threads: 1, measurePeak: false }))).rejects.toThrow(DeviceError);
    await expect(withEnv({ KILN_NATIVE_ISA: "sse2" }, () => createWasmBackend({ threads: 1, measurePeak: false }))).rejects.toThrow(/KILN_NATIVE_ISA=sse2 is not an instruction set/);
  });

  it("createKernels runs WebAssembly unless asked, and natively with { native: true }, the peak from the native FMA loop", async () => {
    const plain = await createKernels({ threads: 1 });
    expect(plain.info.native.kernels).toEqual([]);
    expect(plain.info.native.reason).toMatch(/native: true/);
    await plain.dispose();
    const native = await createKernels({ threads: 2, native: true });
    try {
      expect(native.info.native).toEqual({ kernels: NATIVE_KERNELS, isa: nativeIsas()[0] });
      const before = nativeMatmulCalls();
      const c = native.matmul(new Float32Array([1, 2, 3, 4]), new Float32Array([5, 6, 7, 8]), { m: 2, n: 2, k: 2 });
      expect(Array.from(c)).toEqual([19, 22, 43, 50]);
      expect(nativeMatmulCalls()).toBe(before + 1);
      expect(native.measureNativeCeiling(100_000, 2).gflops).toBeGreaterThan(native.measureCeiling(100_000, 2).gflops / 4);
    } finally {
      await native.dispose();
    }
  });

  it("reads operands past the end the memory had at its first call (the memory grew: a new buffer)", async () => {
    const kernels = await createKernels({ threads: 2, native: true, minFlopsPerThread: 0 });
    try {
      const m = 33, n = 47, k = 300;
      const a = randomArray(m * k, 7), b = randomArray(k * n, 8);
      const first = kernels.matmul(a, b, { m, n, k });
      const buffer = kernels.runtime.memory.buffer;
      // A block larger than the memory was, its last bytes past the old end; A, B and C at its top.
      const block = kernels.alloc(buffer.byteLength / 4 + (m * k + k * n + m * n));
      expect(kernels.runtime.memory.buffer).not.toBe(buffer);
      const at = (offset: number, length: number) => new F32Buffer(kernels.runtime.memory, kernels.runtime.heap, block.ptr + 4 * offset, length);
      const top = block.length - (m * k + k * n + m * n);
      const A = at(top, m * k).set(a), B = at(top + m * k, k * n).set(b), C = at(top + m * k + k * n, m * n);
      expect(A.ptr).toBeGreaterThanOrEqual(buffer.byteLength);
      const before = nativeMatmulCalls();
      kernels.matmulInto({ a: A, b: B, c: C }, { m, n, k });
      expect(nativeMatmulCalls()).toBe(before + 1);
      expect(new Uint8Array(C.array.slice().buffer)).toEqual(new Uint8Array(first.buffer));
      block.free();
    } finally {
      await kernels.dispose();
    }
  });

  it("refuses an argument block whose operands run past the memory", async () => {
    const kernels = await createKernels({ threads: 1, native: true });
    try {
      const rt = kernels.runtime;
      const end = rt.memory.buffer.byteLength;
      writeMatmulArgs(rt, { m: 4, n: 4, k: 4, batch: 1, a: end - 32, b: 0, c: 64, bias: 0, strideA: 16, strideB: 16, strideC: 16, transA: false, transB: false, accumulate: false, alpha: 1 });
      const view = new Uint8Array(rt.memory.buffer);
      expect(() => rt.native!.kernels.matmul(view, rt.argsPtr, 0, 1, 0)).toThrow(/matmul A \(64 bytes at \d+\) runs past the end of the memory/);
      expect(() => rt.native!.kernels.matmul(view, rt.argsPtr + 4, 0, 1, 0)).toThrow(/argument block/);
      expect(() => rt.native!.kernels.matmul(view, rt.argsPtr, 0, 1, 7)).toThrow(/unknown dtype code 7/);
    } finally {
      await kernels.dispose();
    }
  });
});

describe("the browser bundle", () => {
  it("holds no trace of the native addon (it is loaded only through the Node platform)", () => {
    const bundle = fs.readFileSync(new URL("../dist/browser.js", import.meta.url), "utf8");
    for (const word of ["kiln_native.node", "build-native", "createRequire", "KILN_NATIVE_ADDON", 'from "node:']) expect(bundle).not.toContain(word);
    expect(bundle).toContain("native kernels run in Node only");
  });
});
