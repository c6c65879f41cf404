import type { DType } from "@kiln/contract";

/**
 * Where a tensor's bytes live once planned:
 * - param:      the parameter buffer (one flat buffer, named views)
 * - grad:       the gradient buffer (same layout as the parameters)
 * - input:      the per-step input buffer (token ids, targets), uploaded each step
 * - constant:   uploaded once when the plan is bound (position ids)
 * - activation: the activation arena, packed by lifetime
 * - output:     read back after a run (the loss); never reused within a run
 */
export type TensorKind = "param" | "grad" | "input" | "constant" | "activation" | "output";

/** A tensor of the graph: a shape, a dtype and a place. Its bytes are assigned by the planner. */
export interface TensorInfo {
  readonly id: number;
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly kind: TensorKind;
  /** Parameters: the Hugging Face name; others: a readable label for plans and errors. */
  readonly name: string;
  /** For grads: the parameter they belong to. */
  readonly gradOf?: number;
  /** For parameters: not trained (no gradient is made for it). */
  readonly frozen?: boolean;
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}
