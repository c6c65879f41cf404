import type { KernelArgsMap, KernelName } from "@kiln/contract";
import { BackendMemory } from "./backend-memory.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { WASM_KERNELS, type WasmKernel } from "./kernel-table.js";

type HostArray = Float32Array | Int32Array;

/**
 * Runs a contract kernel on plain typed arrays: each array is copied into the
 * kernels' memory, the kernel runs on every thread, and the arrays named as
 * outputs are copied back (in place). Staging buffers are freed afterwards.
 */
export class ArrayCalls {
  private readonly memory: BackendMemory;

  constructor(private readonly rt: KernelRuntime) {
    this.memory = new BackendMemory(rt.heap);
  }

  run<K extends KernelName>(kernel: K, arrays: Record<string, HostArray | undefined>, outputs: readonly string[], args: Record<string, unknown>): void {
    const impl = WASM_KERNELS[kernel] as WasmKernel<K> | undefined;
    if (!impl) throw new Error(`${kernel} is not implemented by @kiln/kernels-wasm`);
    const staged: { key: string; handle: ReturnType<BackendMemory["alloc"]>; host: HostArray }[] = [];
    const callArgs: Record<string, unknown> = { dtype: "f32", ...args };
    try {
      for (const [key, host] of Object.entries(arrays)) {
        if (host === undefined) continue;
        const handle = this.memory.alloc(host.byteLength);
        staged.push({ key, handle, host });
        const ptr = this.memory.address(handle, host.byteLength, key);
        new Uint8Array(this.rt.memory.buffer, ptr, host.byteLength).set(new Uint8Array(host.buffer, host.byteOffset, host.byteLength));
        callArgs[key] = handle;
      }
      impl.run({ rt: this.rt, memory: this.memory }, callArgs as unknown as KernelArgsMap[K]);
      for (const s of staged) {
        if (!outputs.includes(s.key)) continue;
        const ptr = this.memory.address(s.handle, s.host.byteLength, s.key);
        new Uint8Array(s.host.buffer, s.host.byteOffset, s.host.byteLength).set(new Uint8Array(this.rt.memory.buffer, ptr, s.host.byteLength));
      }
    } finally {
      for (const s of staged) this.memory.free(s.handle);
    }
  }
}
