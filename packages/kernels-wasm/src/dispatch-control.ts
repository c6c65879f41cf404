/**
 * Layout of the Int32Array (on its own SharedArrayBuffer) through which the
 * calling thread hands a kernel call to the pool's workers. Slots that
 * different threads write sit on different cache lines.
 *
 *   GENERATION  bumped once per call; workers wait on it
 *   REMAINING   workers still running the current call; the caller waits on it
 *   KERNEL      index into the pool's kernel-name list; -1 tells workers to exit
 *   ARGS        byte offset of the call's argument block in linear memory
 *   ACTIVE      threads taking part in this call (thread indices 0..ACTIVE-1)
 *   FAILED      1 + index of a worker whose call threw, 0 when none did
 */
export const CONTROL = {
  GENERATION: 0,
  REMAINING: 16,
  KERNEL: 32,
  ARGS: 33,
  ACTIVE: 34,
  FAILED: 35,
  LENGTH: 48,
} as const;

export const STOP_KERNEL = -1;

/** What a worker needs to start; sent once in its first message. */
export interface WorkerInit {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: SharedArrayBuffer;
  layout: typeof CONTROL;
  kernelNames: readonly string[];
  threadIndex: number;
  stackTop: number;
  spinIterations: number;
}
