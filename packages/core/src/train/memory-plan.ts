/** Exact device bytes of a training run, by component, known before anything is allocated. */
export interface MemoryPlan {
  /** The parameters in the training dtype, plus their f32 master weights under a 16-bit dtype. */
  parameters: number;
  /** The gradients in the training dtype, plus their f32 sums (and a widening scratch) under a 16-bit dtype. */
  gradients: number;
  /** AdamW m and v (f32). */
  optimizerState: number;
  /** The activation arena of the training step (forward and backward, packed by lifetime). */
  activations: number;
  /** What the arena would need without reuse, for comparison. */
  activationsUnpacked: number;
  /** Token ids, targets, position ids, the loss, the gradient-norm scalar and the finiteness flag. */
  io: number;
  total: number;
}

export function totalOf(p: Omit<MemoryPlan, "total">): MemoryPlan {
  return { ...p, total: p.parameters + p.gradients + p.optimizerState + p.activations + p.io };
}
