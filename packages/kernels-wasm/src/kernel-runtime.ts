import type { NativeKernels } from "@kiln/contract";
import { instantiateKernels, kernelEntry, type KernelEntry, type KernelExports } from "./kernel-instance.js";
import { KERNEL_NAMES, kernelIndex, POOL_KERNEL_NAMES, type PoolKernelName } from "./kernel-names.js";
import { nativeEntries } from "./native-entries.js";
import { chooseNative, type NativeSetup } from "./native-setup.js";
import { warmUpMatmul } from "./warm-up.js";
import { SharedHeap, WASM32_MAX_BYTES, WASM_PAGE_BYTES } from "./shared-heap.js";
import { chooseSimdVariant, type SimdVariant } from "./simd-support.js";
import { canBlockOnAtomics, createInlinePool, createWorkerPool, type ThreadPool } from "./thread-pool.js";
import { loadKernelModule, type MemoryKind, requireKernelModule } from "./wasm-module-loader.js";
import { platform } from "#platform";

export interface RuntimeOptions {
  /** Threads for kernels, the calling thread included. Default: every core. */
  threads?: number;
  /** "auto" (default) picks relaxed SIMD where the engine has it. */
  simd?: SimdVariant | "auto";
  /** Upper bound of the linear memory, at most 4 GiB (the default). */
  maxMemoryBytes?: number;
  /**
   * The longest, in microseconds, a waiting pool thread polls before it sleeps in Atomics.wait
   * (default 250). Each thread adapts below it: on a busy machine it soon sleeps at once. More =
   * lower call latency on an idle machine, more CPU taken from other processes on a busy one.
   */
  spinMicroseconds?: number;
  /** Work (flops) a thread must get before another one is woken for a call (default 2^17). */
  minFlopsPerThread?: number;
  /** Run the matmul on a small problem until V8 has optimised it (up to ~150 ms; default true; skipped when the matmul runs natively). */
  warmUp?: boolean;
  /**
   * Run the matmul as native machine code (AVX-512 or AVX2, this package's Node addon) on
   * the pool's threads, where the addon is built and the CPU runs it; otherwise, and always
   * in browsers, the WebAssembly kernel runs. Default false here, true in createWasmBackend.
   * KILN_NATIVE=0 turns it off whatever this says; KILN_NATIVE_ISA=avx2 forces AVX2.
   */
  native?: boolean;
  /**
   * Node 20 validates relaxed SIMD only after v8.setFlagsFromString("--experimental-wasm-relaxed-simd"),
   * which applies to the whole process. Default true; false never sets it, and the plain SIMD build
   * runs unless the process already has relaxed SIMD (Node >= 22, or started with the flag).
   */
  setV8Flag?: boolean;
}

export interface RuntimeInfo {
  simd: SimdVariant;
  /** Threads kernels run on, the calling thread included. */
  threads: number;
  /** Whether memory is a shared WebAssembly.Memory (false in the single-threaded fallback). */
  sharedMemory: boolean;
  /** Why fewer threads than asked for are used, when that happens. */
  threadLimitReason?: string;
  /** Register tile and k block of the matmul kernel. */
  matmulTile: { mr: number; nr: number; kc: number };
  maxMemoryBytes: number;
  minFlopsPerThread: number;
  /** The kernels that run natively and on which instruction set, or why none do. */
  native: NativeKernels;
}

/** Bytes of stack each thread's instance gets; kernels keep big buffers in scratch, not on the stack. */
const STACK_BYTES = 256 * 1024;
const INITIAL_MEMORY_BYTES = 16 * 1024 * 1024;
const ARGS_BLOCK_BYTES = 256;
/** The longest sleep of a kernel thread waiting for another (SLEEP_NS in csrc/matmul.c), in ms. */
const KERNEL_SLEEP_MS = 0.2;
/** A waiting pool thread's longest poll before it sleeps (microseconds). */
const DEFAULT_SPIN_MICROSECONDS = 250;
/** Below this many flops per thread, waking another thread costs more than it saves. */
const DEFAULT_MIN_FLOPS_PER_THREAD = 1 << 17;

/** One kernel module on one linear memory, its heap, and the threads that run it. */
export interface KernelRuntime {
  readonly info: RuntimeInfo;
  readonly memory: WebAssembly.Memory;
  readonly heap: SharedHeap;
  /** The calling thread's instance. */
  readonly exports: KernelExports;
  /** A small block reserved for the argument struct of the call in flight. */
  readonly argsPtr: number;
  /** Per-thread matmul scratch: thread t owns [matmulScratch + t * matmulScratchStride, +stride). */
  readonly matmulScratch: number;
  readonly matmulScratchStride: number;
  /** Views of the argument block (little-endian words), valid until the memory grows. */
  argsViews(): { u32: Uint32Array; f32: Float32Array };
  /** The native kernels every thread of the pool runs, when they are in use. */
  readonly native?: NativeSetup;
  /** Runs `name` on `active` threads (clamped to the pool) with the argument block at argsPtr. */
  run(name: PoolKernelName, active: number): void;
  dispose(): Promise<void>;
}

/** A memory with the largest maximum the engine grants, from `maxBytes` down to 256 MiB. */
function createMemory(shared: boolean, maxBytes: number): { memory: WebAssembly.Memory; maxBytes: number } {
  let maximum = Math.floor(maxBytes / WASM_PAGE_BYTES);
  const initial = INITIAL_MEMORY_BYTES / WASM_PAGE_BYTES;
  for (;;) {
    try {
      return { memory: new WebAssembly.Memory({ initial, maximum, shared }), maxBytes: maximum * WASM_PAGE_BYTES };
    } catch (error) {
      if (maximum <= 4096) throw error;
      maximum = Math.max(4096, maximum >> 1);
    }
  }
}

export async function createKernelRuntime(options: RuntimeOptions = {}): Promise<KernelRuntime> {
  const simd = chooseSimdVariant(options.simd ?? "auto", options.setV8Flag ?? true);
  if (options.threads !== undefined && !(Number.isInteger(options.threads) && options.threads >= 1)) {
    throw new RangeError(`threads must be a positive integer, got ${options.threads}`);
  }
  const wanted = options.threads ?? platform.coreCount();

  let threadLimitReason: string | undefined;
  let memoryKind: MemoryKind = "shared";
  if (wanted > 1 && !canBlockOnAtomics()) {
    threadLimitReason =
      typeof SharedArrayBuffer === "undefined"
        ? "SharedArrayBuffer is unavailable (browsers need Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)"
        : "this thread may not block in Atomics.wait (a browser main thread): create the kernels inside a Worker";
  }
  if (typeof SharedArrayBuffer === "undefined") memoryKind = "single";
  const threads = threadLimitReason ? 1 : wanted;

  // An emcc-only build has no relaxed modules: "auto" then takes the plain one.
  let chosen: SimdVariant = simd;
  let module: WebAssembly.Module | undefined;
  if (simd === "relaxed" && options.simd !== "relaxed") {
    module = await loadKernelModule("relaxed", memoryKind);
    if (!module) chosen = "plain";
  }
  module ??= await requireKernelModule(chosen, memoryKind);
  const maxMemoryBytes = Math.min(options.maxMemoryBytes ?? WASM32_MAX_BYTES, WASM32_MAX_BYTES);
  const { memory, maxBytes: grantedMax } = createMemory(memoryKind === "shared", maxMemoryBytes);

  const exports = instantiateKernels(module, memory);
  const heap = new SharedHeap(memory, exports.__heap_base.value >>> 0, grantedMax);
  const stackTops = Array.from({ length: threads }, () => heap.alloc(STACK_BYTES) + STACK_BYTES);
  exports.__stack_pointer.value = stackTops[0];

  const argsPtr = heap.alloc(ARGS_BLOCK_BYTES);
  const matmulScratchStride = Math.ceil(exports.kiln_matmul_scratch_bytes() / 64) * 64;
  const matmulScratch = heap.alloc(matmulScratchStride * threads);
  const native = chooseNative(
    options.native === true || (options.native === false ? "native: false" : "not asked for: createKernels({ native: true }) runs the matmul natively"),
    memoryKind === "shared",
  );
  const kernelNames = native.setup ? POOL_KERNEL_NAMES : KERNEL_NAMES;
  const nativeKernels: Record<string, KernelEntry> = native.setup ? nativeEntries(native.setup.kernels, memory) : {};
  const callerKernels = kernelNames.map((name) => nativeKernels[name] ?? kernelEntry(exports, name));
  const spinMicroseconds = options.spinMicroseconds ?? DEFAULT_SPIN_MICROSECONDS;
  if (!(spinMicroseconds >= 0)) throw new RangeError(`spinMicroseconds must be a number >= 0, got ${options.spinMicroseconds}`);
  const pool: ThreadPool =
    threads === 1
      ? createInlinePool(callerKernels)
      : await createWorkerPool({
          module,
          memory,
          kernelNames,
          callerKernels,
          ...(native.setup ? { native: { path: native.setup.path, isa: native.setup.isa } } : {}),
          stackTops,
          threads,
          spinMicroseconds,
          kernelWaitTimeouts: () => exports.kiln_wait_timeouts(),
          kernelSleepMs: KERNEL_SLEEP_MS,
        });

  const tile = exports.kiln_matmul_tile_shape();
  const info: RuntimeInfo = {
    simd: chosen,
    threads,
    sharedMemory: memoryKind === "shared",
    ...(threadLimitReason ? { threadLimitReason } : {}),
    matmulTile: { mr: tile & 0xff, nr: (tile >> 8) & 0xff, kc: tile >>> 16 },
    maxMemoryBytes: grantedMax,
    minFlopsPerThread: options.minFlopsPerThread ?? DEFAULT_MIN_FLOPS_PER_THREAD,
    native: native.info,
  };

  let argsBuffer: ArrayBufferLike | undefined;
  let argsU32 = new Uint32Array(0);
  let argsF32 = new Float32Array(0);
  const runtime: KernelRuntime = {
    info,
    memory,
    heap,
    exports,
    argsPtr,
    ...(native.setup ? { native: native.setup } : {}),
    matmulScratch,
    matmulScratchStride,
    argsViews() {
      const buffer = memory.buffer;
      if (buffer !== argsBuffer) {
        argsBuffer = buffer;
        argsU32 = new Uint32Array(buffer, argsPtr, ARGS_BLOCK_BYTES / 4);
        argsF32 = new Float32Array(buffer, argsPtr, ARGS_BLOCK_BYTES / 4);
      }
      return { u32: argsU32, f32: argsF32 };
    },
    run(name, active) {
      pool.run(kernelIndex(name), argsPtr, active);
    },
    dispose: () => pool.dispose(),
  };
  if (options.warmUp !== false && !native.setup) warmUpMatmul(runtime);
  runtime.heap.resetPeak();
  return runtime;
}
