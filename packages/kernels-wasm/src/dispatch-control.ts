/**
 * Layout of the Int32Array (on its own SharedArrayBuffer) through which the
 * calling thread hands a kernel call to the pool's workers. Slots that
 * different threads write sit on different cache lines.
 *
 *   GENERATION  bumped once per call; idle workers wait on it
 *   STATE       CALL_CLOSED (set by the caller once every part is taken) | workers inside the call;
 *               a worker joins only while the call is open, and the caller returns once none is inside
 *   NEXT_PART   the next part of the call to hand out; each thread inside takes parts until none is left
 *   KERNEL      index into the pool's kernel-name list; -1 tells workers to exit
 *   ARGS        byte offset of the call's argument block in linear memory
 *   ACTIVE      parts of the call: the kernel runs as (args, part, ACTIVE) for part = 0..ACTIVE-1,
 *               each part once, on whichever thread takes it (a part is what a thread of a
 *               static split computes, with that thread's scratch)
 *   FAILED      1 + index of a worker whose part threw, 0 when none did
 */
export const CONTROL = {
  GENERATION: 0,
  STATE: 16,
  NEXT_PART: 32,
  KERNEL: 48,
  ARGS: 49,
  ACTIVE: 50,
  FAILED: 51,
  LENGTH: 64,
} as const;

/** STATE's flag: the call takes no more workers. */
export const CALL_CLOSED = 1 << 30;

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
  /** The longest a waiting thread polls before it sleeps (SpinWait in spin-wait.js). */
  spinMicroseconds: number;
  closedFlag: number;
  /** The native kernels' addon and instruction set, when kernelNames include native ones (Node only). */
  native?: { path: string; isa: string };
}
