/** The exports of one instance of a kernel module. */
export interface KernelExports {
  readonly __stack_pointer: WebAssembly.Global;
  readonly __heap_base: WebAssembly.Global;
  readonly kiln_matmul_scratch_bytes: () => number;
  readonly kiln_matmul_tile_shape: () => number;
  /** Sleeps of a kernel thread waiting for another that ran out their time (csrc/matmul.c); grows from 0. */
  readonly kiln_wait_timeouts: () => number;
  readonly kiln_ceiling_chains: () => number;
  readonly [entry: string]: unknown;
}

/** A kernel entry point with the pool calling convention. */
export type KernelEntry = (argsPtr: number, thread: number, nthreads: number) => void;

/** Instantiates `module` on `memory`; `stackTop` (if given) becomes this instance's stack pointer. */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory, stackTop?: number): KernelExports {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  const exports = instance.exports as unknown as KernelExports;
  if (stackTop !== undefined) exports.__stack_pointer.value = stackTop;
  return exports;
}

export function kernelEntry(exports: KernelExports, name: string): KernelEntry {
  const fn = exports[name];
  if (typeof fn !== "function") throw new Error(`the kernel module has no export ${name}: rebuild @kiln/kernels-wasm`);
  return fn as KernelEntry;
}
