import type { BufferHandle, Kernels, Operand } from "@kiln/contract";

/** The f32 gradient buffer of a step and the small scalar buffer its norm lands in. */
export interface GradientBuffers {
  /** The gradients (or, with a sharded optimizer, where this rank's own part of them starts). */
  grads: Operand;
  /** f32 squared norm at byte 0, the i32 not-finite flag at byte 4. */
  scalars: BufferHandle;
  /** f32 elements of the gradient buffer (the f32 layout's bytes / 4). */
  elements: number;
}

/** Zeroes the gradient buffer before a step's micro-batches add into it. */
export function zeroGradients(k: Kernels, b: GradientBuffers): void {
  k.fill({ out: b.grads, n: b.elements, value: 0, dtype: "f32" });
}

/** The squared norm of every gradient into scalars[0]; with `checkFinite`, scalars[1] (i32) becomes 1 when any gradient is not finite. */
export function measureGradients(k: Kernels, b: GradientBuffers, checkFinite: boolean): void {
  k.sumSquares({ x: b.grads, out: b.scalars, n: b.elements, dtype: "f32" });
  if (checkFinite) {
    const flag = { buffer: b.scalars, byteOffset: 4 };
    k.fill({ out: flag, n: 1, value: 0, dtype: "i32" });
    k.checkFinite({ x: b.grads, flag, n: b.elements, dtype: "f32" });
  }
}
