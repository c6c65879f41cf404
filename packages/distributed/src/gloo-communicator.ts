import { type Backend, type FloatDType, type Operand, bytesPerElement, sliceOperand } from "@kiln/contract";
import type { ReduceOp } from "@kiln/core";
import type { Communicator } from "./communicator.js";
import { downloadToHost } from "./host-staging.js";
import { explainChannelFailure } from "./failure-report.js";
import { type GlooGroupHandle, loadGloo } from "./native-addons.js";
import { narrowToBf16, widenBf16 } from "./rank-order-reductions.js";
import { StarGroup, type StarGroupOptions } from "./star-group.js";

export interface GlooCommunicatorOptions extends StarGroupOptions {
  /** Network interface Gloo binds to (GLOO_SOCKET_IFNAME); default: the address this rank reaches rank 0 from. */
  iface?: string;
}

/**
 * The `gloo` sync backend: the data moves through Gloo's TCP full mesh (ring
 * all-reduce, on a worker thread), staged through the host like the `cpu`
 * backend, so it works with any backend. Rank 0's star group stays beside it as
 * the control channel: it exchanges the Gloo addresses at start-up and, when a
 * Gloo collective fails, names the rank that died or stalled. A ring sums each
 * slice in a different order, so results can differ from the `cpu` backend's
 * rank-order sums in the last bit, but they are the same bits on every rank.
 * Reduce-scatter is a ring on the same mesh (csrc/ring_reduce_scatter.h): each
 * chunk is added along the ring from the rank after its owner, the same bits
 * every run; all-gather is Gloo's ring allgather.
 */
export async function createGlooCommunicator(o: GlooCommunicatorOptions): Promise<Communicator> {
  const addon = loadGloo();
  const group = await StarGroup.connect(o);
  const { rank, worldSize } = o;
  const where = o.iface ? { iface: o.iface } : { hostname: group.localAddress };

  const explain = (what: string, err: unknown) => explainChannelFailure(group, "Gloo", what, err, o.timeoutMs);

  let mesh: GlooGroupHandle;
  try {
    mesh = new addon.GlooGroup(rank, worldSize, where, o.timeoutMs);
    const everyRank = await group.run("exchange of Gloo addresses", mesh.addresses(), joinParts);
    await mesh.connect(splitParts(everyRank, worldSize));
  } catch (err) {
    const e = await explain(`connection of its full mesh (binding ${JSON.stringify(where)})`, err);
    group.close();
    throw e;
  }

  // Gloo collectives must start in the same order on every rank and one at a time: each waits for the one before.
  let tail: Promise<unknown> = Promise.resolve();
  const inOrder = (what: string, run: () => Promise<void>): Promise<void> => {
    const next = tail.then(async () => {
      try {
        await run();
      } catch (err) {
        throw await explain(what, err);
      }
    });
    tail = next.catch(() => undefined);
    return next;
  };

  return {
    rank,
    worldSize,
    kind: "gloo",
    dataPath: "Gloo's TCP ring",
    allReduce(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      if (dtype !== "f32" && dtype !== "bf16") return Promise.reject(new RangeError(`all-reduce of ${dtype} is not supported: f32 and bf16 only`));
      const host = downloadToHost(backend, at, n * bytesPerElement(dtype)); // starts now, so the download overlaps earlier collectives
      return inOrder(`all-reduce (${op}) of ${n} ${dtype}`, async () => {
        const bytes = await host;
        // bf16 is summed in f32 and rounded once, as the cpu backend does.
        const values = dtype === "f32" ? new Float32Array(bytes.buffer, 0, n) : widenBf16(bytes);
        await mesh.allReduceSum(values);
        if (op === "mean") for (let i = 0; i < n; i++) values[i] /= worldSize;
        backend.upload(at, dtype === "f32" ? bytes : narrowToBf16(values));
      });
    },
    broadcast(backend: Backend, at: Operand, bytes: number, root: number) {
      const host = rank === root ? downloadToHost(backend, at, bytes) : Promise.resolve(new Uint8Array(bytes));
      return inOrder(`broadcast of ${bytes} bytes from rank ${root}`, async () => {
        const b = await host;
        await mesh.broadcast(b, root);
        if (rank !== root) backend.upload(at, b);
      });
    },
    reduceScatter(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
      if (dtype !== "f32" && dtype !== "bf16") return Promise.reject(new RangeError(`reduce-scatter of ${dtype} is not supported: f32 and bf16 only`));
      const bytes = n * bytesPerElement(dtype);
      const host = downloadToHost(backend, at, worldSize * bytes);
      return inOrder(`reduce-scatter (${op}) of ${worldSize} x ${n} ${dtype}`, async () => {
        const b = await host;
        const values = dtype === "f32" ? new Float32Array(b.buffer, 0, worldSize * n) : widenBf16(b);
        if (worldSize > 1 && n > 0) await mesh.reduceScatterSum(values, n);
        const sums = values.subarray(rank * n, (rank + 1) * n);
        if (op === "mean") for (let i = 0; i < n; i++) sums[i] /= worldSize;
        backend.upload(sliceOperand(at, rank * bytes), dtype === "f32" ? sums : narrowToBf16(sums));
      });
    },
    allGather(backend: Backend, at: Operand, bytes: number) {
      const all = new Uint8Array(worldSize * bytes);
      const host = backend.download(sliceOperand(at, rank * bytes), all.subarray(rank * bytes, (rank + 1) * bytes));
      return inOrder(`all-gather of ${worldSize} x ${bytes} bytes`, async () => {
        await host;
        if (worldSize > 1 && bytes > 0) await mesh.allGather(all, bytes);
        backend.upload(at, all);
      });
    },
    async allReduceScalars(values: Float64Array, op: ReduceOp) {
      const sums = values.slice();
      await inOrder(`all-reduce (${op}) of ${values.length} host numbers`, () => mesh.allReduceSum(sums));
      if (op === "mean") for (let i = 0; i < sums.length; i++) sums[i] /= worldSize;
      return sums;
    },
    barrier() {
      return inOrder("barrier", () => mesh.barrier());
    },
    async close() {
      await tail;
      mesh.close();
      group.close();
    },
  };
}

/** Every rank's part, by rank, as one buffer: a u32 length then the bytes, per rank. */
function joinParts(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.byteLength, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of parts) {
    view.setUint32(at, p.byteLength, true);
    out.set(p, at + 4);
    at += 4 + p.byteLength;
  }
  return out;
}

function splitParts(joined: Uint8Array, count: number): Uint8Array[] {
  const view = new DataView(joined.buffer, joined.byteOffset, joined.byteLength);
  const parts: Uint8Array[] = [];
  let at = 0;
  for (let r = 0; r < count; r++) {
    const n = view.getUint32(at, true);
    parts.push(joined.slice(at + 4, at + 4 + n));
    at += 4 + n;
  }
  return parts;
}
