/** One micro-batch: token ids and next-token targets, batchSize*seqLen each (targets < 0 are ignored). */
export interface Batch {
  ids: Int32Array;
  targets: Int32Array;
}
