import { BufferTable } from "@kiln/contract";
import type { SharedHeap } from "./shared-heap.js";

/** Contract buffer handles over heap blocks: handle id -> byte offset in linear memory. */
export class BackendMemory extends BufferTable {
  constructor(heap: SharedHeap) {
    super({ allocate: (byteLength) => heap.alloc(byteLength), release: (ptr) => heap.release(ptr) });
  }
}
