import type { KernelRuntime } from "./kernel-runtime.js";

/** Scratch memory that kernel calls borrow for their temporaries, one block per runtime. */
const blocks = new WeakMap<KernelRuntime, { ptr: number; bytes: number }>();

/**
 * Byte offset of at least `bytes` bytes of scratch memory (64-byte aligned) for
 * the call about to run. Calls run one at a time, so they share one block; its
 * contents are not kept between calls. It grows (never shrinks) as calls need.
 * Take it before rt.argsViews(): growing may move the memory's buffer.
 */
export function callScratch(rt: KernelRuntime, bytes: number): number {
  const have = blocks.get(rt);
  if (have && have.bytes >= bytes) return have.ptr;
  if (have) {
    blocks.delete(rt);
    rt.heap.release(have.ptr);
  }
  const size = Math.max(bytes, 2 * (have?.bytes ?? 0), 64 * 1024);
  const ptr = rt.heap.alloc(size);
  blocks.set(rt, { ptr, bytes: size });
  return ptr;
}
