/** Exact device bytes of a training run, by component, known before anything is allocated. */
export interface MemoryPlan {
  parameters: number;
  gradients: number;
  /** AdamW m and v (f32). */
  optimizerState: number;
  /** The activation arena of the training step (forward and backward, packed by lifetime). */
  activations: number;
  /** What the arena would need without reuse, for comparison. */
  activationsUnpacked: number;
  /** Token ids, targets, position ids, the loss and the gradient-norm scalar. */
  io: number;
  total: number;
}

export function totalOf(p: Omit<MemoryPlan, "total">): MemoryPlan {
  return { ...p, total: p.parameters + p.gradients + p.optimizerState + p.activations + p.io };
}
