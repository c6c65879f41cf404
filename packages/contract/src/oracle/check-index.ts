import { KernelArgumentError } from "../errors.js";

/** An id read from an i32 operand, checked to lie in [0, limit). */
export function checkIndex(kernel: string, id: number, limit: number, at: number): number {
  if (!(id >= 0 && id < limit)) {
    throw new KernelArgumentError(`id ${id} at position ${at} is outside [0, ${limit})`, {
      where: kernel,
      hint: "token ids must be smaller than the vocabulary size",
    });
  }
  return id;
}
