import { measureCeiling, measureNativeCeiling, type CeilingResult } from "./ceiling-call.js";
import { ArrayCalls } from "./array-calls.js";
import { ArrayKernels } from "./array-kernels.js";
import { F32Buffer } from "./f32-buffer.js";
import { createKernelRuntime, type KernelRuntime, type RuntimeInfo, type RuntimeOptions } from "./kernel-runtime.js";
import { dispatchMatmul } from "./matmul-dispatch.js";
import { matmulExtents, resolveMatmulShape, type MatmulOptions } from "./matmul-options.js";
import type { HeapStats } from "./shared-heap.js";

export type KernelsOptions = RuntimeOptions;
export type KernelsInfo = RuntimeInfo;

/** Operands of a zero-copy matmul: buffers in the kernels' memory. */
export interface MatmulBuffers {
  a: F32Buffer;
  b: F32Buffer;
  c: F32Buffer;
  bias?: F32Buffer;
}

/** Operands of a copying matmul. `out` receives C (and is read first when accumulating). */
export interface MatmulArrays extends MatmulOptions {
  bias?: Float32Array;
  out?: Float32Array;
}

function checkLength(name: string, have: number, need: number): void {
  if (have < need) throw new RangeError(`matmul: ${name} has ${have} elements, the shape needs ${need}`);
}

/**
 * Fast f32 kernels on plain Float32Arrays, running WebAssembly SIMD on every
 * core. Create with `await createKernels()`; call `dispose()` when done.
 */
export class Kernels extends ArrayKernels {
  constructor(private readonly rt: KernelRuntime) {
    super(new ArrayCalls(rt));
  }

  /** The SIMD variant, thread count, memory setup and native kernels in use. */
  get info(): KernelsInfo {
    return this.rt.info;
  }

  /** A buffer of `length` f32 in the kernels' memory, for zero-copy calls. Contents undefined. */
  alloc(length: number): F32Buffer {
    const ptr = this.rt.heap.alloc(length * 4);
    return new F32Buffer(this.rt.memory, this.rt.heap, ptr, length);
  }

  /** A buffer holding a copy of `data`. */
  upload(data: ArrayLike<number>): F32Buffer {
    return this.alloc(data.length).set(data);
  }

  /**
   * C = alpha * op(A) @ op(B) (+ C when accumulate) (+ bias), batched.
   * Copies operands in and C out; returns C (`out` when given).
   */
  matmul(a: Float32Array, b: Float32Array, options: MatmulArrays): Float32Array {
    const shape = resolveMatmulShape(options);
    const ext = matmulExtents(shape);
    checkLength("a", a.length, ext.a);
    checkLength("b", b.length, ext.b);
    if (options.bias) checkLength("bias", options.bias.length, ext.bias);
    if (options.out) checkLength("out", options.out.length, ext.c);
    if (options.accumulate && !options.out) throw new RangeError("matmul: accumulate needs `out` holding the C to add to");

    const buffers: F32Buffer[] = [];
    const stage = (data: Float32Array, length: number) => {
      const buf = this.alloc(length);
      buffers.push(buf);
      buf.array.set(data.subarray(0, length));
      return buf;
    };
    try {
      const ab = stage(a, ext.a);
      const bb = stage(b, ext.b);
      const biasb = options.bias ? stage(options.bias, ext.bias) : undefined;
      const cb = options.accumulate && options.out ? stage(options.out, ext.c) : this.alloc(ext.c);
      if (!buffers.includes(cb)) buffers.push(cb);
      this.matmulInto({ a: ab, b: bb, c: cb, ...(biasb ? { bias: biasb } : {}) }, options);
      const out = options.out ?? new Float32Array(ext.c);
      out.set(cb.array);
      return out;
    } finally {
      for (const buf of buffers) buf.free();
    }
  }

  /** The same product on buffers already in the kernels' memory: no copies. */
  matmulInto(buffers: MatmulBuffers, options: MatmulOptions): void {
    const shape = resolveMatmulShape(options);
    const ext = matmulExtents(shape);
    checkLength("a", buffers.a.length, ext.a);
    checkLength("b", buffers.b.length, ext.b);
    checkLength("c", buffers.c.length, ext.c);
    if (buffers.bias) checkLength("bias", buffers.bias.length, ext.bias);
    dispatchMatmul(
      this.rt,
      {
        m: shape.m,
        n: shape.n,
        k: shape.k,
        batch: shape.batch,
        strideA: shape.strideA,
        strideB: shape.strideB,
        strideC: shape.strideC,
        lda: shape.lda,
        a: buffers.a.ptr,
        b: buffers.b.ptr,
        c: buffers.c.ptr,
        bias: buffers.bias?.ptr ?? 0,
        transA: options.transA ?? false,
        transB: options.transB ?? false,
        accumulate: options.accumulate ?? false,
        alpha: options.alpha ?? 1,
      },
      options.threads,
    );
  }

  /** Register-only multiply-add throughput on `threads` threads: this build's ceiling. */
  measureCeiling(iterations: number, threads = this.rt.info.threads): CeilingResult {
    return measureCeiling(this.rt, iterations, threads);
  }

  /** The native kernels' register-only FMA throughput on `threads` threads (createKernels({ native: true }) only). */
  measureNativeCeiling(iterations: number, threads = this.rt.info.threads): CeilingResult {
    return measureNativeCeiling(this.rt, iterations, threads);
  }

  memoryStats(): HeapStats {
    return this.rt.heap.stats();
  }

  /** The runtime underneath (memory, heap, pool) for backends built on these kernels. */
  get runtime(): KernelRuntime {
    return this.rt;
  }

  /** Stops the worker threads. The kernels are unusable afterwards. */
  dispose(): Promise<void> {
    return this.rt.dispose();
  }
}

/** Loads the best kernel build for this engine and starts `threads` threads (default: every core). */
export async function createKernels(options: KernelsOptions = {}): Promise<Kernels> {
  return new Kernels(await createKernelRuntime(options));
}
