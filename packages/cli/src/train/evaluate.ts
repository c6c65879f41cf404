import type { BatchSampler, ForwardRunner } from "@kiln/core";

/** Mean loss over the first `iters` validation batches (the same batches every time). */
export async function evaluate(runner: ForwardRunner, val: BatchSampler, iters: number): Promise<number> {
  val.setCursor({ epoch: 0, index: 0 });
  let loss = 0;
  let rows = 0;
  const batch = val.allocateBatch();
  for (let i = 0; i < iters; i++) {
    await val.next(batch);
    loss += await runner.run(batch.ids, batch.targets);
    for (const t of batch.targets) if (t >= 0) rows++;
  }
  return rows > 0 ? loss / rows : 0;
}
