import { CALL_CLOSED, CONTROL, STOP_KERNEL, type WorkerInit } from "./dispatch-control.js";
import { ContentionGate } from "./contention-gate.js";
import { SpinWait } from "./spin-wait.js";
import type { KernelEntry } from "./kernel-instance.js";
import type { KernelWorker } from "./platform-types.js";
import { platform } from "#platform";

/** The calling thread plus `threads - 1` workers that run kernels on one shared memory. */
export interface ThreadPool {
  /** Threads a call may use, the calling thread included. */
  readonly threads: number;
  /**
   * Runs kernel `kernel` (an index into the pool's kernel names) with its
   * argument block at `argsPtr` as `active` parts (clamped to the pool's
   * threads), (argsPtr, part, active) for each part once, and returns when all
   * are done. The calling thread takes parts, from part 0, until none is left;
   * workers that are awake take the others. A worker that is not running (its
   * core busy with another process) takes none and delays nothing.
   */
  run(kernel: number, argsPtr: number, active: number): void;
  dispose(): Promise<void>;
}

export interface WorkerThreadOptions {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  kernelNames: readonly string[];
  /** Entry points of the calling thread's own instance, by kernel index. */
  callerKernels: readonly KernelEntry[];
  /** Stack tops for workers 1..threads-1 (index 0 is the caller's and unused here). */
  stackTops: readonly number[];
  threads: number;
  /** The longest a waiting thread polls before it sleeps in Atomics.wait (spin-wait.js). */
  spinMicroseconds: number;
  /** Sleeps inside kernels that ran out (kiln_wait_timeouts), and how long one is (ms). */
  kernelWaitTimeouts: () => number;
  kernelSleepMs: number;
  /** The native addon each worker loads for the native names in kernelNames (Node only). */
  native?: { path: string; isa: string };
}

/** Runs every call on the calling thread: no SharedArrayBuffer needed. */
export function createInlinePool(callerKernels: readonly KernelEntry[]): ThreadPool {
  return {
    threads: 1,
    run(kernel, argsPtr) {
      callerKernels[kernel](argsPtr, 0, 1);
    },
    async dispose() {},
  };
}

/** Whether this thread may block in Atomics.wait (Node: always; browsers: workers only). */
export function canBlockOnAtomics(): boolean {
  if (typeof SharedArrayBuffer === "undefined") return false;
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
}

/** Starts `threads - 1` workers, each with its own instance of `module` on `memory`, and waits until all are ready. */
export async function createWorkerPool(opts: WorkerThreadOptions): Promise<ThreadPool> {
  const control = new Int32Array(new SharedArrayBuffer(CONTROL.LENGTH * 4));
  const workerErrors: string[] = [];
  const ports = Array.from({ length: opts.threads - 1 }, () => platform.spawnWorker());
  const ready = ports.map(
    (port, i) =>
      new Promise<void>((resolve, reject) => {
        port.on((msg) => {
          if (msg.type === "ready") resolve();
          else if (msg.type === "failed") reject(new Error(`kernel worker ${i + 1} failed to start: ${msg.message}`));
          else if (msg.type === "error") workerErrors.push(`worker ${msg.threadIndex}: ${msg.message}`);
        });
        const init: WorkerInit = {
          module: opts.module,
          memory: opts.memory,
          control: control.buffer as SharedArrayBuffer,
          layout: CONTROL,
          kernelNames: opts.kernelNames,
          threadIndex: i + 1,
          stackTop: opts.stackTops[i + 1],
          spinMicroseconds: opts.spinMicroseconds,
          closedFlag: CALL_CLOSED,
          ...(opts.native ? { native: opts.native } : {}),
        };
        port.post(init);
      }),
  );
  try {
    await Promise.all(ready);
  } catch (error) {
    for (const p of ports) p.terminate();
    throw error;
  }
  // Idle workers block in Atomics.wait; they must not keep the process alive.
  for (const p of ports) p.keepAlive(false);
  return new AtomicsPool(control, ports, opts, workerErrors);
}

class AtomicsPool implements ThreadPool {
  readonly threads: number;
  private disposed = false;
  private readonly waiter: SpinWait;
  private readonly gate = new ContentionGate();

  constructor(
    private readonly control: Int32Array,
    private readonly ports: KernelWorker[],
    private readonly opts: WorkerThreadOptions,
    private readonly workerErrors: string[],
  ) {
    this.threads = opts.threads;
    this.waiter = new SpinWait(opts.spinMicroseconds / 1000);
  }

  run(kernel: number, argsPtr: number, active: number): void {
    if (this.disposed) throw new Error("the kernel thread pool was disposed");
    const n = Math.max(1, Math.min(active, this.threads));
    const entry = this.opts.callerKernels[kernel];
    if (n === 1) {
      entry(argsPtr, 0, 1);
      return;
    }
    if (this.gate.takeInline()) {
      // A busy machine: every part here, as the workers would have run them.
      for (let part = 0; part < n; part++) entry(argsPtr, part, n);
      return;
    }
    // The call's slots, then open it (STATE 0), then wake the workers.
    const c = this.control;
    Atomics.store(c, CONTROL.KERNEL, kernel);
    Atomics.store(c, CONTROL.ARGS, argsPtr);
    Atomics.store(c, CONTROL.ACTIVE, n);
    Atomics.store(c, CONTROL.FAILED, 0);
    Atomics.store(c, CONTROL.NEXT_PART, 0);
    Atomics.store(c, CONTROL.STATE, 0);
    Atomics.add(c, CONTROL.GENERATION, 1);
    Atomics.notify(c, CONTROL.GENERATION, n - 1);

    let callerError: unknown;
    const start = performance.now();
    const timeouts = this.opts.kernelWaitTimeouts();
    try {
      for (let part; (part = Atomics.add(c, CONTROL.NEXT_PART, 1)) < n; ) entry(argsPtr, part, n);
    } catch (error) {
      callerError = error;
    }
    const waitedMs = this.closeCall();
    const end = performance.now();
    this.gate.afterCall(end - start, waitedMs + (this.opts.kernelWaitTimeouts() - timeouts) * this.opts.kernelSleepMs);
    if (callerError !== undefined) throw callerError;
    const failed = Atomics.load(c, CONTROL.FAILED);
    if (failed) {
      const name = this.opts.kernelNames[kernel];
      throw new Error(`kernel ${name} threw in worker ${failed - 1}${this.workerErrors.length ? `: ${this.workerErrors.join("; ")}` : ""}`);
    }
  }

  /** Takes no more workers into the call, waits until those inside have left, and returns how long that took (ms). */
  private closeCall(): number {
    const c = this.control;
    let state = Atomics.or(c, CONTROL.STATE, CALL_CLOSED) | CALL_CLOSED;
    if (state === CALL_CLOSED) return 0;
    const from = performance.now();
    while (state !== CALL_CLOSED) state = this.waiter.waitWhile(c, CONTROL.STATE, state);
    return performance.now() - from;
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    for (const p of this.ports) p.keepAlive(true);
    Atomics.store(this.control, CONTROL.KERNEL, STOP_KERNEL);
    Atomics.add(this.control, CONTROL.GENERATION, 1);
    Atomics.notify(this.control, CONTROL.GENERATION);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), 2000)));
    const result = await Promise.race([Promise.all(this.ports.map((p) => p.exited)), timeout]);
    clearTimeout(timer);
    if (result === "timeout") for (const p of this.ports) p.terminate();
  }
}
