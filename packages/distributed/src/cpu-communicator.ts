import { type Backend, type FloatDType, type Operand, bytesPerElement } from "@kiln/contract";
import type { ReduceOp } from "@kiln/core";
import type { Communicator } from "./communicator.js";
import { partOf, sumInRankOrder, sumScalarsInRankOrder } from "./rank-order-reductions.js";
import { StarGroup, type StarGroupOptions } from "./star-group.js";

/** Seconds a collective may take unless told otherwise (rank 0's evaluation and checkpoints count against it). */
export const DEFAULT_SYNC_TIMEOUT_S = 300;

export type CpuCommunicatorOptions = StarGroupOptions;

/**
 * The `cpu` sync backend: ranks are processes (on one machine or several)
 * joined over TCP, and every operand is staged through the host: downloaded,
 * combined at rank 0 in rank order, and the result uploaded on every rank, so
 * all ranks hold bit-identical values. Works with any backend, GPUs included.
 */
export async function createCpuCommunicator(o: CpuCommunicatorOptions): Promise<Communicator> {
  const group = await StarGroup.connect(o);
  const { rank, worldSize } = o;
  // Each method hands the group a promise of its bytes without awaiting first, so collectives are numbered in call order.
  const staged = async (backend: Backend, at: Operand, bytes: number): Promise<Uint8Array> => {
    const host = new Uint8Array(bytes);
    await backend.download(at, host);
    return host;
  };
  return {
    rank,
    worldSize,
    kind: "cpu",
    async allReduce(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      const combine = sumInRankOrder(dtype, op, worldSize);
      const result = await group.run(`all-reduce (${op}) of ${n} ${dtype}`, staged(backend, at, n * bytesPerElement(dtype)), combine);
      backend.upload(at, result);
    },
    async broadcast(backend: Backend, at: Operand, bytes: number, root: number) {
      // Root sends its bytes through rank 0; the others send nothing and take them.
      const part = rank === root ? staged(backend, at, bytes) : new Uint8Array(0);
      const result = await group.run(`broadcast of ${bytes} bytes from rank ${root}`, part, partOf(root));
      if (rank !== root) backend.upload(at, result);
    },
    async allReduceScalars(values: Float64Array, op: ReduceOp) {
      const result = await group.run(`all-reduce (${op}) of ${values.length} host numbers`, new Uint8Array(values.slice().buffer), sumScalarsInRankOrder(op, worldSize));
      return new Float64Array(result.buffer, result.byteOffset, values.length);
    },
    async barrier() {
      await group.run("barrier", new Uint8Array(0), () => new Uint8Array(0));
    },
    async close() {
      group.close();
    },
  };
}
