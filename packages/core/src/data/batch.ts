/** One micro-batch: token ids and next-token targets, batchSize*seqLen each (targets < 0 are ignored). */
export interface Batch {
  ids: Int32Array;
  targets: Int32Array;
  /**
   * Rows packed with several documents (examples): for each token, where its document begins in
   * its row (batchSize*seqLen). Attention stays inside a document and positions count from its start.
   */
  docStarts?: Int32Array;
}
