import type { DType } from "./dtype.js";
import type { KernelArgsMap, KernelName, Kernels } from "./kernels/index.js";

/** The contract's version. A backend states the version it implements. */
export const CONTRACT_VERSION = 1 as const;

/** An opaque device buffer. Shapes and dtypes live in core, not here. */
export interface BufferHandle {
  readonly id: number;
  readonly byteLength: number;
}

/** A byte offset into a buffer: how a kernel addresses a named view of a larger buffer. */
export interface BufferSlice {
  readonly buffer: BufferHandle;
  readonly byteOffset: number;
}

/** What a kernel argument points at: a whole buffer (offset 0) or a slice. */
export type Operand = BufferHandle | BufferSlice;

export function isBufferSlice(op: Operand): op is BufferSlice {
  return (op as BufferSlice).buffer !== undefined;
}

/** The buffer and byte offset an operand names. */
export function resolveOperand(op: Operand): { buffer: BufferHandle; byteOffset: number } {
  return isBufferSlice(op) ? { buffer: op.buffer, byteOffset: op.byteOffset } : { buffer: op, byteOffset: 0 };
}

/** A slice `byteOffset` bytes into `op`. */
export function sliceOperand(op: Operand, byteOffset: number): BufferSlice {
  const r = resolveOperand(op);
  return { buffer: r.buffer, byteOffset: r.byteOffset + byteOffset };
}

export interface MemoryStats {
  /** Bytes in live allocations. */
  inUseBytes: number;
  /** Highest inUseBytes since creation or the last resetPeakMemory(). */
  peakBytes: number;
  /** Bytes the device can hold in all (address-space limit for wasm, device memory for GPUs). */
  totalBytes: number;
  /** Number of live allocations. */
  liveAllocations: number;
  /** Number of alloc() calls since creation (a steady-state step must not raise it). */
  allocCalls: number;
  /**
   * Device memory the backend holds for its kernels' own scratch, beside the buffers
   * (a GPU's library workspace, partial sums): absent where kernels take none.
   */
  kernelScratchBytes?: number;
}

export type DeviceKind = "cpu" | "gpu" | "reference";

export interface DeviceDescription {
  /** e.g. "WebAssembly SIMD (relaxed) x 2 threads", "NVIDIA H100 80GB HBM3". */
  name: string;
  kind: DeviceKind;
  /** Bytes this device can allocate in all. */
  memoryBytes: number;
  /** CPU: worker threads used by kernels. GPU: streaming multiprocessors. */
  parallelism: number;
  /** CPU: "none" | "simd128" | "relaxed-simd". */
  simd?: string;
  /** GPU: compute capability, e.g. "9.0". */
  computeCapability?: string;
  /** Vendor libraries the kernels call, e.g. "matmul: cuBLASLt 13.1.1"; absent when none. */
  libraries?: string;
  /** CPU: the kernels that run as native machine code beside the portable ones, or why none do. */
  native?: NativeKernels;
}

/** Kernels a CPU backend runs natively (a Node addon) instead of in its portable build. */
export interface NativeKernels {
  /** Contract kernels that run natively, e.g. ["matmul"]; empty when none do. */
  kernels: readonly KernelName[];
  /** The instruction set they run on, e.g. "avx512" or "avx2"; absent when none run. */
  isa?: string;
  /** Why no kernel runs natively, e.g. "KILN_NATIVE=0"; absent when some do. */
  reason?: string;
}

export interface Capabilities {
  device: DeviceDescription;
  /** The activation dtypes each kernel accepts; an empty list means not implemented. */
  kernelDTypes: Record<KernelName, readonly DType[]>;
  /** Peak FLOP/s per compute dtype (for MFU); absent when unknown. */
  peakFlops: Partial<Record<DType, number>>;
}

/**
 * Timestamps the device takes as it reaches them in its stream: how a profiler times
 * kernels on a backend whose calls return before they run, without waiting for each.
 */
export interface DeviceTimer {
  /** Enqueues a timestamp after everything issued so far. */
  mark(): void;
  /**
   * Resolves, once every mark since the last read is done, to each one's time in
   * milliseconds after the first of them (in mark order); the next mark starts a new list.
   */
  read(): Promise<Float64Array>;
}

/** A recorded run of kernel calls (KernelGraphs). */
export interface KernelGraph {
  readonly id: number;
}

/**
 * Kernel calls recorded once and launched again as a whole (CUDA graphs): one host
 * call instead of one per kernel, for backends whose every call costs the host time.
 */
export interface KernelGraphs {
  /** From now until end(), kernel calls are recorded, not run; anything else (copies, downloads, waits) throws meanwhile. */
  begin(): void;
  /** Stops recording: the calls since begin(). Throws why not (recording stops either way). */
  end(): KernelGraph;
  /**
   * Runs the graph's calls as recorded (the same buffers, the same arguments, in order);
   * false, running nothing, when the graph can no longer run (the backend moved memory
   * its kernels use): record it again.
   */
  launch(graph: KernelGraph): boolean;
  release(graph: KernelGraph): void;
}

/**
 * The backend contract, v1. Calls are issued in order on one stream: kernels,
 * upload and copy may run later than they return, but always in issue order;
 * download() and synchronize() resolve once everything issued before them is done.
 */
export interface Backend {
  readonly contractVersion: typeof CONTRACT_VERSION;
  /** Short registry name: "reference", "wasm", "cuda". */
  readonly name: string;
  capabilities(): Capabilities;

  /** A new buffer of `byteLength` bytes, contents undefined. Throws MemoryError when it cannot. */
  alloc(byteLength: number): BufferHandle;
  free(buffer: BufferHandle): void;
  /** Copies `data`'s bytes to `dst`. `data` may be reused as soon as this returns. */
  upload(dst: Operand, data: ArrayBufferView): void;
  /** Copies `out.byteLength` bytes from `src` into `out`. */
  download(src: Operand, out: ArrayBufferView): Promise<void>;
  /** Copies `byteLength` bytes between buffers (regions must not overlap). */
  copy(src: Operand, dst: Operand, byteLength: number): void;
  memoryStats(): MemoryStats;
  resetPeakMemory(): void;

  /** Every v1 kernel; see kernels/*.ts for each one's layout. */
  readonly kernels: Kernels;
  /**
   * A kernel call made ready to issue again and again (optional): the arguments are
   * checked and the operands resolved once, so each issue costs the host less. The
   * same call as `kernels[kernel](args)` each time; valid while every buffer it names
   * is allocated, and `args` must not change afterwards.
   */
  prepare?<K extends KernelName>(kernel: K, args: KernelArgsMap[K]): () => void;
  /**
   * Makes room now for the scratch that calls of `kernel` with these arguments take
   * beside their operands (optional: backends whose kernels take such scratch), so that
   * running them later allocates nothing; `prepare` does it for the calls it prepares.
   * memoryStats().kernelScratchBytes then counts it.
   */
  reserveScratch?<K extends KernelName>(kernel: K, args: KernelArgsMap[K]): void;

  synchronize(): Promise<void>;
  /** Device-side timestamps (optional: backends whose calls return before they run). */
  readonly timer?: DeviceTimer;
  /** Recording kernel calls to launch again as a whole (optional). */
  readonly graphs?: KernelGraphs;
  /** Frees everything; the backend is unusable afterwards. */
  dispose(): void;
}
