import type { Backend, Operand } from "@kiln/contract";

/**
 * How data-parallel ranks agree on gradients. One communicator per rank; every
 * rank calls the same collectives in the same order.
 */
export interface Communicator {
  /** This process's rank in [0, worldSize). */
  readonly rank: number;
  readonly worldSize: number;
  /** Sync backend name: "single", "cpu" (host staging) or "nccl". */
  readonly kind: string;
  /**
   * In place: every rank's `n` f32 elements at `buffer` become the mean over ranks.
   * Resolves when the result is in `buffer` on this rank.
   */
  allReduceMean(backend: Backend, buffer: Operand, n: number): Promise<void>;
  /** Resolves when every rank has reached it. */
  barrier(): Promise<void>;
  close(): Promise<void>;
}
