import { type KernelName, type OperandSpec, bytesPerElement, kernelSpecs } from "@kiln/contract";
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
 * before they return (the CPU backend). On an asynchronous backend (a GPU) set
 * `synchronize`: the trainer then waits for the device after every kernel of
 * the forward and backward passes, so each call's time is its run time (and the
 * step runs slower than it would unprofiled).
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
  ) {}

  /** Whether a step is being recorded now. */
  get recording(): boolean {
    return this.current !== undefined;
  }

  beginStep(step: number): void {
    this.current = this.armed ? { step, start: this.now(), end: NaN, kernels: [], data: [] } : undefined;
  }

  endStep(): void {
    const s = this.current;
    if (!s) return;
    s.end = this.now();
    this.steps.push(s);
    this.current = undefined;
  }

  /** Runs `call` and, while a step is being recorded, records it as one call of `kernel`. */
  time(call: () => void, kernel: KernelName, region: KernelRegion, cost: KernelCost): void {
    const s = this.current;
    if (!s) return call();
    const start = this.now();
    call();
    s.kernels.push({ kernel, region, start, end: this.now(), flops: cost.flops, bytes: cost.bytes });
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
