import { expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { createSingleRankCommunicator } from "@kiln/distributed";

it("leaves every value as it is when there is one rank", async () => {
  const backend = createReferenceBackend();
  const comm = createSingleRankCommunicator();
  const buf = backend.alloc(12);
  backend.upload(buf, new Float32Array([1, -2, 3.5]));
  await comm.allReduce(backend, { buffer: buf, byteOffset: 0 }, 3, "f32", "mean");
  await comm.broadcast(backend, { buffer: buf, byteOffset: 0 }, 12, 0);
  await comm.reduceScatter(backend, { buffer: buf, byteOffset: 0 }, 3, "f32", "mean");
  await comm.allGather(backend, { buffer: buf, byteOffset: 0 }, 12);
  const out = new Float32Array(3);
  await backend.download(buf, out);
  expect(Array.from(out)).toEqual([1, -2, 3.5]);
  expect(Array.from(await comm.allReduceScalars(Float64Array.of(2, 3), "sum"))).toEqual([2, 3]);
  expect([comm.rank, comm.worldSize, comm.kind]).toEqual([0, 1, "single"]);
  await comm.barrier();
  await comm.close();
});
