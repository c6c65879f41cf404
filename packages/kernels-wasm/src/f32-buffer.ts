import type { SharedHeap } from "./shared-heap.js";

/**
 * `length` f32 values living in the kernels' linear memory. `array` is a
 * zero-copy view; take it again after anything that may grow the memory
 * (any alloc), since views only cover the memory as it was when made.
 */
export class F32Buffer {
  private freed = false;

  constructor(
    private readonly memory: WebAssembly.Memory,
    private readonly heap: SharedHeap,
    /** Byte offset in linear memory. */
    readonly ptr: number,
    readonly length: number,
  ) {}

  get byteLength(): number {
    return this.length * 4;
  }

  /** A Float32Array over this buffer's memory (no copy). */
  get array(): Float32Array {
    if (this.freed) throw new Error("F32Buffer used after free()");
    return new Float32Array(this.memory.buffer, this.ptr, this.length);
  }

  /** Copies `data` in, starting at element `offset`. */
  set(data: ArrayLike<number>, offset = 0): this {
    this.array.set(data, offset);
    return this;
  }

  /** A copy of the contents, detached from linear memory. */
  toArray(): Float32Array {
    return this.array.slice();
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.heap.release(this.ptr);
  }
}
