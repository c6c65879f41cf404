import type { Backend, FloatDType, Operand } from "@kiln/contract";
import type { GradientSync, ReduceOp } from "../../src/train/gradient-sync.js";

/** One collective being gathered: each rank's contribution, and who waits for the result. */
interface Gathering {
  parts: (Float32Array | Float64Array | Uint8Array | undefined)[];
  waiters: ((result: Float32Array | Float64Array | Uint8Array) => void)[];
}

/**
 * `worldSize` GradientSyncs for trainers in one thread (tests only): each
 * collective resolves once every rank has called it, with the values summed in
 * rank order, as a real communicator does. f32 operands only. `calls` records
 * every collective as (rank, what) in call order.
 */
export function localSyncGroup(worldSize: number): { members: GradientSync[]; calls: { rank: number; what: string }[] } {
  const gatherings = new Map<number, Gathering>();
  const calls: { rank: number; what: string }[] = [];
  const gather = <T extends Float32Array | Float64Array | Uint8Array>(seq: number, rank: number, part: T, combine: (parts: T[]) => T): Promise<T> => {
    let g = gatherings.get(seq);
    if (!g) gatherings.set(seq, (g = { parts: [], waiters: [] }));
    g.parts[rank] = part;
    const done = new Promise<T>((resolve) => g.waiters.push(resolve as (r: Float32Array | Float64Array | Uint8Array) => void));
    if (g.parts.filter((p) => p !== undefined).length === worldSize) {
      gatherings.delete(seq);
      const result = combine(g.parts as T[]);
      for (const w of g.waiters) w(result);
    }
    return done;
  };
  const sumInRankOrder = <T extends Float32Array | Float64Array>(parts: T[]): T => {
    const out = parts[0].slice() as T;
    for (const p of parts.slice(1)) for (let i = 0; i < out.length; i++) out[i] += p[i];
    return out;
  };
  const members = Array.from({ length: worldSize }, (_, rank): GradientSync => {
    let seq = 0;
    return {
      rank,
      worldSize,
      async allReduce(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
        if (dtype !== "f32") throw new Error("the local sync group reduces f32 only");
        calls.push({ rank, what: `allReduce ${at.byteOffset}+${n}` });
        const mine = new Float32Array(n);
        await backend.download(at, mine);
        const sum = await gather(seq++, rank, mine, sumInRankOrder);
        backend.upload(at, op === "mean" ? sum.map((x) => x / worldSize) : sum);
      },
      async broadcast(backend: Backend, at: Operand, bytes: number, root: number) {
        calls.push({ rank, what: `broadcast ${bytes}` });
        const mine = new Uint8Array(bytes);
        await backend.download(at, mine);
        backend.upload(at, await gather(seq++, rank, mine, (parts) => parts[root]));
      },
      async reduceScatter(backend: Backend, at: Operand, n: number, dtype: FloatDType, op: ReduceOp) {
        if (dtype !== "f32") throw new Error("the local sync group reduces f32 only");
        calls.push({ rank, what: `reduceScatter ${at.byteOffset}+${worldSize}x${n}` });
        const mine = new Float32Array(worldSize * n);
        await backend.download(at, mine);
        const sum = (await gather(seq++, rank, mine, sumInRankOrder)).subarray(rank * n, (rank + 1) * n);
        backend.upload({ buffer: at.buffer, byteOffset: at.byteOffset + 4 * rank * n }, op === "mean" ? sum.map((x) => x / worldSize) : sum);
      },
      async allGather(backend: Backend, at: Operand, bytes: number) {
        if (bytes % 4 !== 0) throw new Error("the local sync group gathers whole f32 words only");
        calls.push({ rank, what: `allGather ${worldSize}x${bytes}` });
        const mine = new Float32Array(bytes / 4);
        await backend.download({ buffer: at.buffer, byteOffset: at.byteOffset + rank * bytes }, mine);
        const all = await gather(seq++, rank, mine, (parts) => {
          const out = new Float32Array(worldSize * mine.length);
          parts.forEach((p, r) => out.set(p, r * mine.length));
          return out;
        });
        backend.upload(at, all);
      },
      async allReduceScalars(values: Float64Array, op: ReduceOp) {
        calls.push({ rank, what: "scalars" });
        const sum = await gather(seq++, rank, values.slice(), sumInRankOrder);
        return op === "mean" ? sum.map((x) => x / worldSize) : sum;
      },
    };
  });
  return { members, calls };
}
