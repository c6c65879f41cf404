import { expect, it } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { createSingleRankCommunicator } from "@kiln/distributed";

it("leaves gradients as they are when there is one rank", async () => {
  const backend = createReferenceBackend();
  const comm = createSingleRankCommunicator();
  const buf = backend.alloc(12);
  backend.upload(buf, new Float32Array([1, -2, 3.5]));
  await comm.allReduceMean(backend, buf, 3);
  const out = new Float32Array(3);
  await backend.download(buf, out);
  expect(Array.from(out)).toEqual([1, -2, 3.5]);
  expect([comm.rank, comm.worldSize, comm.kind]).toEqual([0, 1, "single"]);
  await comm.barrier();
  await comm.close();
});
