import { type Backend, type FloatDType, type Operand, TrainingError } from "@kiln/contract";
import type { ReduceOp } from "@kiln/core";
import type { Communicator } from "./communicator.js";
import { explainChannelFailure } from "./failure-report.js";
import { StarGroup, type StarGroupOptions } from "./star-group.js";

/**
 * One rank's NCCL collectives on its device's buffers: the shape of what
 * @kiln/kernels-cuda's openNcclCollectives returns (this package does not
 * depend on the CUDA package; the CLI hands them over).
 */
export interface DeviceCollectives {
  allReduce(at: Operand, n: number, dtype: FloatDType, op: "sum" | "mean"): Promise<void>;
  broadcast(at: Operand, bytes: number, root: number): Promise<void>;
  /** In place (ncclReduceScatter, receiving into this rank's chunk): chunk `rank` of the `worldSize * n` elements at `at` becomes the ranks' sum (or mean) of it. */
  reduceScatter(at: Operand, n: number, dtype: FloatDType, op: "sum" | "mean"): Promise<void>;
  /** In place (ncclAllGather, sending this rank's chunk): chunk r of the `worldSize * bytes` bytes at `at` becomes rank r's on every rank. */
  allGather(at: Operand, bytes: number): Promise<void>;
  close(): void;
}

export interface NcclCommunicatorOptions extends StarGroupOptions {
  /** Rank 0 only: makes NCCL's unique id (ncclUniqueId of @kiln/kernels-cuda). */
  uniqueId: () => Uint8Array;
}

/** The `nccl` communicator before its device has joined: everything but the device collectives works. */
export interface NcclCommunicator extends Communicator {
  /** Joins NCCL with the unique id rank 0 made (openNcclCollectives on this rank's backend); every rank calls it once, before any device collective. */
  joinDevice(join: (uniqueId: Uint8Array) => Promise<DeviceCollectives>): Promise<void>;
}

/**
 * The `nccl` sync backend: gradients are all-reduced by NCCL on the devices,
 * with no host staging. Rank 0's star group is the control channel: it hands
 * NCCL's unique id to every rank, carries the host numbers (loss sums, stop
 * votes, data cursors) and barriers, and names the rank behind a failed NCCL
 * collective (NCCL itself only says that one failed).
 */
export async function createNcclCommunicator(o: NcclCommunicatorOptions): Promise<NcclCommunicator> {
  const { rank, worldSize } = o;
  const group = await StarGroup.connect(o);
  // Rank 0's part: 1 and the id, or 0 and why it could not make one (every rank then stops with that reason).
  const made = (): Uint8Array => {
    try {
      const id = o.uniqueId();
      return Uint8Array.from([1, ...id]);
    } catch (err) {
      return Uint8Array.from([0, ...new TextEncoder().encode((err as Error).message)]);
    }
  };
  const answer = await group.run("exchange of NCCL's unique id", rank === 0 ? made() : new Uint8Array(0), (parts) => parts[0]);
  if (answer[0] !== 1) {
    group.close();
    throw new TrainingError(`rank 0 could not make NCCL's unique id: ${new TextDecoder().decode(answer.subarray(1))}`, {
      where: `data-parallel rank 0 of ${worldSize}`,
      hint: "kiln doctor shows whether NCCL is found; --sync-backend cpu works without it",
    });
  }
  const uniqueId = answer.slice(1);
  let device: DeviceCollectives | undefined;
  const explain = (what: string, err: unknown) => explainChannelFailure(group, "NCCL", what, err, o.timeoutMs);
  const onDevice = async (what: string, run: (d: DeviceCollectives) => Promise<void>): Promise<void> => {
    if (!device) throw new Error(`the nccl communicator's ${what} came before joinDevice()`);
    try {
      await run(device);
    } catch (err) {
      throw await explain(what, err);
    }
  };

  return {
    rank,
    worldSize,
    kind: "nccl",
    dataPath: "NCCL on the devices",
    async joinDevice(join) {
      try {
        device = await join(uniqueId);
      } catch (err) {
        throw await explain("join", err);
      }
    },
    allReduce(_backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      return onDevice(`all-reduce (${op}) of ${n} ${dtype}`, (d) => d.allReduce(at, n, dtype, op));
    },
    broadcast(_backend: Backend, at: Operand, bytes: number, root: number) {
      return onDevice(`broadcast of ${bytes} bytes from rank ${root}`, (d) => d.broadcast(at, bytes, root));
    },
    reduceScatter(_backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      return onDevice(`reduce-scatter (${op}) of ${worldSize} x ${n} ${dtype}`, (d) => d.reduceScatter(at, n, dtype, op));
    },
    allGather(_backend: Backend, at: Operand, bytes: number) {
      return onDevice(`all-gather of ${worldSize} x ${bytes} bytes`, (d) => d.allGather(at, bytes));
    },
    allReduceScalars: (values: Float64Array, op: ReduceOp) => group.allReduceScalars(values, op),
    barrier: () => group.barrier(),
    async close() {
      device?.close();
      group.close();
    },
  };
}
