import type { Backend, FloatDType, Operand } from "@kiln/contract";

/** How a collective combines the ranks' values: their sum, or their mean (the sum divided by the world size). */
export type ReduceOp = "sum" | "mean";

/**
 * The collectives a data-parallel Trainer calls: the gradient-sync hook. Core
 * defines it and never implements a transport; `@kiln/distributed`'s
 * communicators satisfy it (host staging over sockets for `cpu`, device
 * buffers for `nccl`). Every rank calls the same collectives in the same
 * order; several may be in flight at once and complete in the order started.
 * Operands are device buffers of `backend`, so a device-side implementation
 * never has to copy through the host.
 */
export interface GradientSync {
  /** This process's rank in [0, worldSize). */
  readonly rank: number;
  readonly worldSize: number;
  /** In place: every rank's `n` elements of `dtype` at `at` become their sum or mean over the ranks, the same bits on every rank. */
  allReduce(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp): Promise<void>;
  /** In place: `bytes` bytes at `at` on every rank become rank `root`'s. */
  broadcast(backend: Backend, at: Operand, bytes: number, root: number): Promise<void>;
  /**
   * In place, for a sharded optimizer: the `worldSize * n` elements of `dtype` at `at` are
   * `worldSize` chunks of `n`; chunk `rank` of this rank becomes the sum (or mean) over the
   * ranks of their chunk `rank` (what every rank's allReduce would put there, up to the
   * order of the additions). The other chunks are left undefined.
   */
  reduceScatter(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp): Promise<void>;
  /**
   * In place: the `worldSize * bytes` bytes at `at` are `worldSize` chunks of `bytes`; chunk
   * r on every rank becomes rank r's chunk r (each rank's shard, gathered everywhere).
   */
  allGather(backend: Backend, at: Operand, bytes: number): Promise<void>;
  /** Host numbers, summed (or averaged) over the ranks in rank order in f64; every rank gets the same values. */
  allReduceScalars(values: Float64Array, op: ReduceOp): Promise<Float64Array>;
}
