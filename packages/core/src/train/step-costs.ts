import { type Backend, type BufferHandle, KERNEL_NAMES, type KernelName, type Kernels } from "@kiln/contract";
import type { KernelNodeAttrs } from "../graph/kernel-node.js";
import { type KernelCost, kernelCost, kernelNodeCost } from "../exec/step-profiler.js";
import { AdamW } from "../optim/adamw.js";
import { measureGradients, zeroGradients } from "./gradient-kernels.js";
import { MasterWeights } from "./master-weights.js";
import { TRAINER_SCALAR_BYTES, planTraining } from "./plan-training.js";

/** One kernel call of a training step and what it computes and moves (kernelCost). */
export interface KernelCallCost extends KernelCost {
  kernel: KernelName;
}

/** The kernel calls a Trainer issues for one optimizer step, in order. */
export interface TrainingStepCosts {
  /** Zeroing the gradients, before the micro-batches. */
  before: KernelCallCost[];
  /** The compiled forward and backward pass: once per micro-batch. */
  microBatch: KernelCallCost[];
  /** Gradient norm (and finite check), AdamW, rounding the masters into 16-bit parameters: once per step. */
  after: KernelCallCost[];
}

/** A backend that runs nothing and records each kernel call's cost in `calls`; its buffers are names only. */
function costRecorder(calls: KernelCallCost[]): Backend {
  const kernels = Object.fromEntries(KERNEL_NAMES.map((name) => [name, (args: unknown) => calls.push({ kernel: name, ...kernelCost(name, args) })]));
  let ids = 0;
  return { kernels: kernels as unknown as Kernels, alloc: (byteLength: number): BufferHandle => ({ id: ++ids, byteLength }) } as unknown as Backend;
}

/**
 * The kernel calls of one training step of (model, batch, seqLen) as a Trainer on a
 * device of `device`'s kind issues them, with their FLOPs and operand bytes, without
 * a backend: the planned graph's nodes and the optimizer's calls (AdamW and the master
 * weights made by the Trainer's own classes, over stand-in buffers). The arguments are
 * planTraining's.
 */
export function trainingStepCosts(...args: Parameters<typeof planTraining>): TrainingStepCosts {
  const { layout, stateLayout, graph } = planTraining(...args);
  const dtype = layout.dtype;
  const microBatch = graph.graph.nodes.map((node) => {
    const attrs = node.attrs as unknown as KernelNodeAttrs;
    return { kernel: attrs.kernel, ...kernelNodeCost(attrs) };
  });
  const calls: KernelCallCost[] = [];
  const backend = costRecorder(calls);
  const grads = { grads: backend.alloc(stateLayout.bytes), scalars: backend.alloc(TRAINER_SCALAR_BYTES), elements: stateLayout.bytes / 4 };
  const [m, v] = [backend.alloc(stateLayout.bytes), backend.alloc(stateLayout.bytes)];
  const hyper = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
  const params = backend.alloc(layout.bytes);
  const masters = dtype === "f32" ? undefined : new MasterWeights(backend, layout, stateLayout, params);
  const adamw = new AdamW(backend, layout, stateLayout, { params, grads: grads.grads, m, v, master: masters?.master }, hyper);
  zeroGradients(backend.kernels, grads);
  const before = calls.splice(0);
  measureGradients(backend.kernels, grads, dtype === "f16");
  adamw.update(1e-3, 1, 1);
  return { before, microBatch, after: calls };
}

/**
 * The least time the calls can take on a device: each call at the longer of its FLOPs at
 * `peakFlops` and its operand bytes at `bytesPerSecond` (a roofline per kernel, no launch
 * costs, nothing overlapped between calls).
 */
export function rooflineSeconds(calls: readonly KernelCost[], peakFlops: number, bytesPerSecond: number): number {
  return calls.reduce((t, c) => t + Math.max(c.flops / peakFlops, c.bytes / bytesPerSecond), 0);
}

/** The roofline of a whole step with `microBatches` micro-batches (rooflineSeconds of every call), and the operand bytes its calls move. */
export function stepRoofline(costs: TrainingStepCosts, microBatches: number, peakFlops: number, bytesPerSecond: number): { seconds: number; bytes: number } {
  const parts = [costs.before, costs.microBatch, costs.after];
  const times = [1, microBatches, 1];
  return {
    seconds: parts.reduce((t, calls, i) => t + times[i] * rooflineSeconds(calls, peakFlops, bytesPerSecond), 0),
    bytes: parts.reduce((t, calls, i) => t + times[i] * calls.reduce((b, c) => b + c.bytes, 0), 0),
  };
}
