import { type DeviceTimer, type KernelName, type OperandSpec, bytesPerElement, kernelSpecs } from "@kiln/contract";
import type { KernelNodeAttrs } from "../graph/kernel-node.js";

/** Where a kernel call of a training step belongs. */
export type KernelRegion = "forward" | "backward" | "optimizer";

/**
 * What one kernel call computes and moves, as the contract counts them: its FLOPs
 * (0 where the contract counts none) and the bytes of its operands (see kernelCost).
 */
export interface KernelCost {
  flops: number;
  bytes: number;
}

/** One kernel call: host times in milliseconds (the profiler's clock) and its cost. */
export interface KernelEvent extends KernelCost {
  kernel: KernelName;
  region: KernelRegion;
  start: number;
  end: number;
  /** The call's arguments other than buffers (describeKernelArgs), e.g. "m=8192 n=2304 k=768 transB dtype=bf16". */
  args?: string;
}

/** Time the step spent getting its data: waiting for the next batch, or copying it to the device. */
export interface DataEvent {
  name: "next batch" | "upload";
  start: number;
  end: number;
}

/** Everything recorded in one optimizer step, in the order it happened. */
export interface ProfiledStep {
  /** The step's number as the logs show it: 1 for the first step ever. */
  step: number;
  start: number;
  end: number;
  kernels: KernelEvent[];
  data: DataEvent[];
}

/**
 * Records the kernel calls and data waits of the steps a trainer takes while it
 * is armed. A trainer given a profiler times its calls through it (a separate,
 * instrumented set of calls: a trainer without one runs no timing code at all).
 *
 * Times are host times around each call: exact on a backend whose kernels run
 * before they return (the CPU backend). On an asynchronous backend (a GPU) give it
 * the backend's `timer`: each call is then bracketed by two device timestamps and,
 * once the step is done (readDeviceTimes), its time is the device's run time of the
 * kernel, with nothing waited for in between (the step runs as it would unprofiled,
 * plus the marks). Without a timer, set `synchronize`: the trainer then waits for
 * the device after every kernel of the forward and backward passes, so each call's
 * time is its run time plus a round trip (and the step runs slower).
 */
export class StepProfiler {
  /** Steps recorded so far, oldest first. */
  readonly steps: ProfiledStep[] = [];
  /** Steps begun while armed are recorded. */
  armed = false;
  private current: ProfiledStep | undefined;

  constructor(
    /** Milliseconds from any fixed origin (default performance.now). */
    readonly now: () => number = () => performance.now(),
    /** Waits until the device has run every kernel issued so far (asynchronous backends only). */
    readonly synchronize?: () => Promise<void>,
    /** The device's timestamps (asynchronous backends): kernel times as the device ran them. */
    readonly timer?: DeviceTimer,
  ) {}

  /** Timer marks enqueued and not yet read; the current step's first mark comes after `markBase` of them. */
  private unreadMarks = 0;
  private markBase = 0;

  /** Whether a step is being recorded now. */
  get recording(): boolean {
    return this.current !== undefined;
  }

  beginStep(step: number): void {
    this.current = this.armed ? { step, start: this.now(), end: NaN, kernels: [], data: [] } : undefined;
    this.markBase = this.unreadMarks;
  }

  endStep(): void {
    const s = this.current;
    if (!s) return;
    s.end = this.now();
    this.steps.push(s);
    this.current = undefined;
  }

  /** Runs `call` and, while a step is being recorded, records it as one call of `kernel`. */
  time(call: () => void, kernel: KernelName, region: KernelRegion, cost: KernelCost, args?: string): void {
    const s = this.current;
    if (!s) return call();
    const timer = this.timer;
    const start = this.now();
    timer?.mark();
    call();
    timer?.mark();
    if (timer) this.unreadMarks += 2;
    s.kernels.push({ kernel, region, start, end: this.now(), flops: cost.flops, bytes: cost.bytes, ...(args !== undefined ? { args } : {}) });
  }

  /**
   * With a timer: waits for the current step's marks and makes each kernel call's time
   * the device's (its two marks), placed on the profiler's clock from the host time at
   * which the step's first call was issued. Call it after the step's last kernel.
   */
  async readDeviceTimes(): Promise<void> {
    const s = this.current;
    if (!this.timer || this.unreadMarks === 0) return;
    const base = this.markBase;
    this.unreadMarks = 0;
    this.markBase = 0;
    const times = await this.timer.read();
    if (!s || s.kernels.length === 0) return;
    const origin = s.kernels[0].start - times[base];
    s.kernels.forEach((k, i) => {
      k.start = origin + times[base + 2 * i];
      k.end = origin + times[base + 2 * i + 1];
    });
  }

  /** Records a data wait that began at `start` and ends now. */
  data(name: DataEvent["name"], start: number): void {
    this.current?.data.push({ name, start, end: this.now() });
  }

  /** Moves the end of the last kernel call to now (after waiting for the device: its true end). */
  settleLastKernel(): void {
    const last = this.current?.kernels.at(-1);
    if (last) last.end = this.now();
  }
}

/**
 * The cost of one call of `kernel` with these arguments: FLOPs as the contract counts
 * them (0 where it does not), and the bytes of the operands the call names, each at
 * its contract extent: inputs read once, outputs written once, in-out operands both.
 * That is the least memory traffic of the call, a floor for bandwidth-bound kernels
 * (an operand with row gaps, such as a packed q|k|v, counts its whole extent).
 */
export function kernelCost(kernel: KernelName, args: unknown): KernelCost {
  const spec = kernelSpecs[kernel];
  const count = spec.flops as ((a: unknown) => number) | undefined;
  const given = args as Record<string, unknown>;
  const operandBytes = (o: OperandSpec) => (given[o.key] === undefined ? 0 : o.elements * bytesPerElement(o.dtype) * (o.role === "inout" ? 2 : 1));
  const operands = (spec.operands as (a: unknown) => OperandSpec[])(args);
  return { flops: count ? count(args) : 0, bytes: operands.reduce((t, o) => t + operandBytes(o), 0) };
}

/** The cost of a graph node's kernel call: its bound operands and its other arguments. */
export function kernelNodeCost(attrs: KernelNodeAttrs): KernelCost {
  return kernelCost(attrs.kernel, { ...attrs.operands, ...attrs.args });
}

/**
 * A kernel call's shape: its integer arguments and strings as key=value and its true
 * flags by name, in their order, e.g. "m=8192 n=2304 k=768 transB dtype=bf16". Buffers,
 * false flags, fractional values (eps, learning rates, scales) and AdamW's step count
 * are left out, so the calls of one step and the next describe alike.
 */
export function describeKernelArgs(args: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(args)) {
    if (value === true) parts.push(key);
    else if (typeof value === "string" || (Number.isInteger(value) && key !== "step")) parts.push(`${key}=${value}`);
  }
  return parts.join(" ");
}
