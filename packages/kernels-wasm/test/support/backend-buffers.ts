import type { Backend, BufferHandle } from "@kiln/contract";

/** Device buffers a test allocates on a backend it opens later (in beforeAll), all freed at once. */
export class BackendBuffers {
  private readonly live: BufferHandle[] = [];

  constructor(private readonly backend: () => Backend) {}

  /** A buffer holding `data`. */
  upload(data: ArrayBufferView): BufferHandle {
    const b = this.empty(data.byteLength);
    this.backend().upload(b, data);
    return b;
  }

  /** A buffer of `bytes`, contents undefined. */
  empty(bytes: number): BufferHandle {
    const b = this.backend().alloc(bytes);
    this.live.push(b);
    return b;
  }

  freeAll(): void {
    for (const b of this.live.splice(0)) this.backend().free(b);
  }
}
