import type { BatchSampler } from "../data/batch-sampler.js";
import type { ForwardRunner } from "../train/forward-runner.js";

/**
 * Mean loss over the first `iters` validation batches (the same batches every time).
 * Data parallel: each rank reads its slice of every batch and `sumOverRanks` adds
 * the ranks' loss sums and row counts, so every rank gets the global batches' mean.
 */
export async function evaluate(runner: ForwardRunner, val: BatchSampler, iters: number, sumOverRanks?: (values: Float64Array) => Promise<Float64Array>): Promise<number> {
  val.setCursor({ epoch: 0, index: 0 });
  let loss = 0;
  let rows = 0;
  const batch = val.allocateBatch();
  for (let i = 0; i < iters; i++) {
    await val.next(batch);
    loss += await runner.run(batch.ids, batch.targets, batch.docStarts);
    for (const t of batch.targets) if (t >= 0) rows++;
  }
  if (sumOverRanks) [loss, rows] = await sumOverRanks(Float64Array.of(loss, rows));
  return rows > 0 ? loss / rows : 0;
}
