import { type Backend, type FloatDType, type Operand, bytesPerElement, sliceOperand } from "@kiln/contract";
import type { ReduceOp } from "@kiln/core";
import type { Communicator } from "./communicator.js";
import { downloadToHost } from "./host-staging.js";
import { chunkSumsInRankOrder, concatenateByRank, narrowToBf16, partOf, sumInRankOrder, widenBf16 } from "./rank-order-reductions.js";
import { joinSharedMemory } from "./shared-memory-plane.js";
import { StarGroup, type StarGroupOptions } from "./star-group.js";

/** Seconds a collective may take unless told otherwise (rank 0's evaluation and checkpoints count against it). */
export const DEFAULT_SYNC_TIMEOUT_S = 300;

export interface CpuCommunicatorOptions extends StarGroupOptions {
  /** Sum through shared memory when every rank runs on this machine (default true); false: always over TCP. */
  sharedMemory?: boolean;
}

/**
 * The `cpu` sync backend: ranks are processes (on one machine or several)
 * joined over TCP, and every operand is staged through the host: downloaded,
 * summed in rank order ((x0 + x1) + x2 ..., in f32), and uploaded on every
 * rank, so all ranks hold bit-identical values. When every rank runs on this
 * machine, operands are summed through a shared-memory segment (each rank
 * adds its slice of every chunk); otherwise, or where shared memory is not
 * available, rank 0 sums them and sends the result over TCP. Works with any
 * backend, GPUs included. `dataPath` says which, and why not shared memory.
 * Reduce-scatter adds the same values in the same order as all-reduce, so a
 * rank's chunk has the bits all-reduce would give it; over TCP rank 0 sends
 * each rank only its chunk. All-gather sends only each rank's chunk in.
 */
export async function createCpuCommunicator(o: CpuCommunicatorOptions): Promise<Communicator> {
  const group = await StarGroup.connect(o);
  const { rank, worldSize } = o;
  const plane =
    o.sharedMemory === false
      ? { unavailable: "turned off" }
      : await joinSharedMemory(group, o.timeoutMs).catch((err: unknown) => {
          group.close();
          throw err;
        });
  const shm = "sum" in plane ? plane : undefined;
  // Each method hands the group a promise of its bytes without awaiting first, so collectives are numbered in call order.
  return {
    rank,
    worldSize,
    kind: "cpu",
    dataPath: shm ? "shared memory" : `TCP through rank 0 (no shared memory: ${"unavailable" in plane ? plane.unavailable : ""})`,
    async allReduce(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      const what = `all-reduce (${op}) of ${n} ${dtype}`;
      if (!shm) {
        const combine = sumInRankOrder(dtype, op, worldSize);
        backend.upload(at, await group.run(what, downloadToHost(backend, at, n * bytesPerElement(dtype)), combine));
        return;
      }
      if (dtype !== "f32" && dtype !== "bf16") throw new RangeError(`all-reduce of ${dtype} is not supported: f32 and bf16 only`);
      // bf16 is widened exactly, summed in f32 and rounded once, as the TCP path does. The sum takes its turn now, in call order.
      const values = downloadToHost(backend, at, n * bytesPerElement(dtype)).then((bytes) => (dtype === "f32" ? new Float32Array(bytes.buffer, 0, n) : widenBf16(bytes)));
      const sums = await shm.sum(values, what);
      if (op === "mean") for (let i = 0; i < n; i++) sums[i] /= worldSize;
      backend.upload(at, dtype === "f32" ? sums : narrowToBf16(sums));
    },
    async broadcast(backend: Backend, at: Operand, bytes: number, root: number) {
      // Root sends its bytes through rank 0; the others send nothing and take them.
      const part = rank === root ? downloadToHost(backend, at, bytes) : new Uint8Array(0);
      const result = await group.run(`broadcast of ${bytes} bytes from rank ${root}`, part, partOf(root));
      if (rank !== root) backend.upload(at, result);
    },
    async reduceScatter(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      const what = `reduce-scatter (${op}) of ${worldSize} x ${n} ${dtype}`;
      const bytes = n * bytesPerElement(dtype);
      const mine = sliceOperand(at, rank * bytes);
      if (!shm) {
        const combine = chunkSumsInRankOrder(dtype, op, worldSize, n);
        backend.upload(mine, await group.runEach(what, downloadToHost(backend, at, worldSize * bytes), combine));
        return;
      }
      if (dtype !== "f32" && dtype !== "bf16") throw new RangeError(`reduce-scatter of ${dtype} is not supported: f32 and bf16 only`);
      const values = downloadToHost(backend, at, worldSize * bytes).then((b) => (dtype === "f32" ? new Float32Array(b.buffer, 0, worldSize * n) : widenBf16(b)));
      const sums = (await shm.reduceScatterSum(values, n, what)).subarray(rank * n, (rank + 1) * n);
      if (op === "mean") for (let i = 0; i < n; i++) sums[i] /= worldSize;
      backend.upload(mine, dtype === "f32" ? sums : narrowToBf16(sums));
    },
    async allGather(backend: Backend, at: Operand, bytes: number) {
      const what = `all-gather of ${worldSize} x ${bytes} bytes`;
      const mine = sliceOperand(at, rank * bytes);
      if (!shm) {
        backend.upload(at, await group.run(what, downloadToHost(backend, mine, bytes), concatenateByRank));
        return;
      }
      const all = new Uint8Array(worldSize * bytes);
      const staged = backend.download(mine, all.subarray(rank * bytes, (rank + 1) * bytes)).then(() => all);
      backend.upload(at, await shm.allGather(staged, bytes, what));
    },
    allReduceScalars: (values: Float64Array, op: ReduceOp) => group.allReduceScalars(values, op),
    barrier: () => group.barrier(),
    async close() {
      shm?.close();
      group.close();
    },
  };
}
