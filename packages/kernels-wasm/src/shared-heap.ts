import { MemoryError } from "@kiln/contract";

export const WASM_PAGE_BYTES = 65536;
/** wasm32 addresses 2^32 bytes: 65536 pages. */
export const WASM32_MAX_BYTES = 65536 * WASM_PAGE_BYTES;
/** Every block starts on a cache line and spans whole cache lines. */
export const HEAP_ALIGN = 64;

export interface HeapStats {
  /** Bytes in live allocations (rounded up to whole cache lines). */
  inUseBytes: number;
  /** Highest inUseBytes since creation or the last resetPeak(). */
  peakBytes: number;
  /** Bytes the heap may ever reach: the memory's maximum (4 GiB for wasm32 at most). */
  totalBytes: number;
  /** Bytes of linear memory committed so far (memory.buffer.byteLength). */
  committedBytes: number;
  liveAllocations: number;
  allocCalls: number;
  /** Free blocks: a measure of fragmentation. */
  freeBlocks: number;
}

interface FreeBlock {
  start: number;
  end: number;
}

const alignUp = (x: number, a: number) => Math.ceil(x / a) * a;

/**
 * A best-fit allocator over one WebAssembly.Memory, above the module's own
 * data and stack (`base`). Free blocks live in an array sorted by address and
 * are merged with their neighbours on free; when nothing fits the memory grows
 * (memory.grow) by at least an eighth of its size. Requests that would pass
 * `maxBytes` (at most 4 GiB) throw a MemoryError before anything is touched.
 *
 * Bookkeeping is on the JavaScript side only, so blocks hold nothing but data.
 */
export class SharedHeap {
  private readonly free: FreeBlock[] = [];
  private readonly live = new Map<number, number>();
  /** End of the region handed to the heap so far (everything above is uncommitted). */
  private top: number;
  private inUse = 0;
  private peak = 0;
  private allocCalls = 0;

  constructor(
    private readonly memory: WebAssembly.Memory,
    base: number,
    private readonly maxBytes: number = WASM32_MAX_BYTES,
  ) {
    if (maxBytes > WASM32_MAX_BYTES) throw new RangeError(`maxBytes ${maxBytes} is above the wasm32 limit of 4 GiB`);
    const start = alignUp(base, HEAP_ALIGN);
    this.top = memory.buffer.byteLength;
    if (this.top > start) this.free.push({ start, end: this.top });
    else this.top = start;
  }

  /** Byte offset of a new block of at least `bytes` bytes, aligned to `align` (a power of two >= 64). */
  alloc(bytes: number, align: number = HEAP_ALIGN): number {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RangeError(`alloc: bytes must be a non-negative integer, got ${bytes}`);
    if (align < HEAP_ALIGN || (align & (align - 1)) !== 0) throw new RangeError(`alloc: align must be a power of two >= ${HEAP_ALIGN}`);
    const size = Math.max(HEAP_ALIGN, alignUp(bytes, HEAP_ALIGN));
    let index = this.bestFit(size, align);
    if (index < 0) {
      this.growFor(size, align);
      index = this.bestFit(size, align);
    }
    const ptr = this.take(index, size, align);
    this.live.set(ptr, size);
    this.inUse += size;
    this.peak = Math.max(this.peak, this.inUse);
    this.allocCalls++;
    return ptr;
  }

  release(ptr: number): void {
    const size = this.live.get(ptr);
    if (size === undefined) throw new Error(`free: ${ptr} is not a live allocation of this heap`);
    this.live.delete(ptr);
    this.inUse -= size;
    this.insertFree({ start: ptr, end: ptr + size });
  }

  /** Size in bytes of the live block at `ptr`. */
  sizeOf(ptr: number): number | undefined {
    return this.live.get(ptr);
  }

  stats(): HeapStats {
    return {
      inUseBytes: this.inUse,
      peakBytes: this.peak,
      totalBytes: this.maxBytes,
      committedBytes: this.memory.buffer.byteLength,
      liveAllocations: this.live.size,
      allocCalls: this.allocCalls,
      freeBlocks: this.free.length,
    };
  }

  resetPeak(): void {
    this.peak = this.inUse;
  }

  /** Index of the smallest free block that holds `size` bytes at `align`, or -1. */
  private bestFit(size: number, align: number): number {
    let best = -1;
    let bestLength = Infinity;
    for (let i = 0; i < this.free.length; i++) {
      const b = this.free[i];
      const length = b.end - b.start;
      if (length < bestLength && alignUp(b.start, align) + size <= b.end) {
        best = i;
        bestLength = length;
        if (length === size) break;
      }
    }
    return best;
  }

  /** Carves `size` bytes out of free block `index`; the remains stay free. */
  private take(index: number, size: number, align: number): number {
    const block = this.free[index];
    const ptr = alignUp(block.start, align);
    const pieces: FreeBlock[] = [];
    if (ptr > block.start) pieces.push({ start: block.start, end: ptr });
    if (ptr + size < block.end) pieces.push({ start: ptr + size, end: block.end });
    this.free.splice(index, 1, ...pieces);
    return ptr;
  }

  /** Adds a block, merging it with the free blocks it touches. */
  private insertFree(block: FreeBlock): void {
    let lo = 0;
    let hi = this.free.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.free[mid].start < block.start) lo = mid + 1;
      else hi = mid;
    }
    const prev = this.free[lo - 1];
    const next = this.free[lo];
    if (prev && prev.end === block.start) {
      prev.end = block.end;
      if (next && next.start === prev.end) {
        prev.end = next.end;
        this.free.splice(lo, 1);
      }
    } else if (next && next.start === block.end) {
      next.start = block.start;
    } else {
      this.free.splice(lo, 0, block);
    }
  }

  /** Grows the memory so that a block of `size` at `align` fits at the top. */
  private growFor(size: number, align: number): void {
    const last = this.free[this.free.length - 1];
    const startAtTop = last && last.end === this.top ? last.start : this.top;
    const needEnd = alignUp(startAtTop, align) + size;
    if (needEnd > this.maxBytes) {
      const st = this.stats();
      throw new MemoryError(
        `cannot allocate ${size} bytes: the WebAssembly heap would need ${needEnd} bytes, ` +
          `above its limit of ${this.maxBytes} bytes (${st.inUseBytes} in use in ${st.liveAllocations} blocks)`,
        {
          where: "@kiln/kernels-wasm heap",
          hint:
            this.maxBytes < WASM32_MAX_BYTES
              ? "raise maxMemoryBytes (up to 4 GiB), or use a smaller model or batch"
              : "wasm32 addresses at most 4 GiB: use a smaller model or batch, or the GPU backend",
        },
      );
    }
    const committed = this.memory.buffer.byteLength;
    const minPages = Math.ceil((needEnd - committed) / WASM_PAGE_BYTES);
    const maxPages = Math.floor((this.maxBytes - committed) / WASM_PAGE_BYTES);
    const pages = Math.min(maxPages, Math.max(minPages, Math.ceil(committed / WASM_PAGE_BYTES / 8)));
    try {
      this.memory.grow(pages);
    } catch (cause) {
      throw new MemoryError(`the engine refused to grow WebAssembly memory by ${pages * WASM_PAGE_BYTES} bytes to ${committed + pages * WASM_PAGE_BYTES}`, {
        where: "@kiln/kernels-wasm heap",
        hint: "the process is out of memory or the memory's maximum is lower than requested; free buffers or lower the batch size",
        cause,
      });
    }
    const newTop = this.memory.buffer.byteLength;
    this.insertFree({ start: this.top, end: newTop });
    this.top = newTop;
  }
}
