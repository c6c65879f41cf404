import type { Backend, Kernels, Operand } from "@kiln/contract";
import type { Graph } from "./graph.js";

/** Values a compiled step reads at run time (set before each run, read by kernel calls). */
export interface RuntimeScalars {
  /** d(total loss)/d(each row's loss): 1 / (valid rows x accumulation steps). */
  lossScale: number;
  /** d(total loss)/d(each mixture-of-experts layer's load-balancing loss): 1 / accumulation steps (x the f16 loss scale). */
  auxScale: number;
  /** The load-balancing loss coefficient (trainer.load_balance_alpha). */
  loadBalanceAlpha: number;
  /** u32 seed of this micro-batch's dropout masks (LoRA dropout), new at each. */
  dropoutSeed: number;
}

/** What compiling a node into its kernel call needs (compileKernelNode). */
export interface CompileContext {
  readonly graph: Graph;
  readonly kernels: Kernels;
  /** The backend's prepared calls, where it has them (Backend.prepare). */
  readonly prepare?: Backend["prepare"];
  /** The backend's reservation of kernel scratch, where it has one (Backend.reserveScratch). */
  readonly reserveScratch?: Backend["reserveScratch"];
  readonly runtime: RuntimeScalars;
  /** The operand holding tensor `id`, `elementOffset` elements in. */
  operand(id: number, elementOffset?: number): Operand;
}

/** What a node's gradient rule (ops/grad-rule.ts) may do while autodiff walks the graph backwards. */
export interface BackwardBuilder {
  readonly graph: Graph;
  /** Whether a gradient must flow into tensor `id` (a parameter, or computed from one). */
  needsGrad(id: number): boolean;
  /** Adds a gradient contribution for activation `id` (summed when several arrive). */
  addGrad(id: number, grad: number): void;
  /** The gradient tensor of parameter `id`; kernels accumulate into it. */
  paramGrad(id: number): number;
  /** A new activation tensor for the backward pass. */
  activation(shape: readonly number[], like: number, name: string): number;
}
