#!/usr/bin/env node
// All-reduce, reduce-scatter and all-gather bandwidth of the host-staged sync backends
// of @kiln/distributed: `cpu` through shared memory (ranks on one machine), `cpu` over
// TCP (kiln's star, summed at rank 0, what ranks on several machines use without Gloo)
// and `gloo` (Gloo's TCP ring; its ring reduce-scatter and allgather): N rank processes
// on this machine run each collective on one f32 buffer (all-reduce and reduce-scatter:
// sum); rank 0 prints one JSON object per path and collective, measured one after the
// other in the same run.
//
//   node tooling/bench/allreduce-cpu.mjs [--ranks 2] [--mb 100] [--calls 5] [--paths shm,tcp,gloo]
//     [--collectives allreduce,reducescatter,allgather]
//
// Needs the packages built: pnpm --filter "@kiln/distributed..." build
// Each rank stages its buffer through the reference backend's host memory, as
// the trainer's buckets go through a CPU backend. GB/s is the algorithm bandwidth,
// buffer bytes / seconds per call (what a training step waits for); for reduce-scatter
// and all-gather the buffer is the whole one, N chunks (as nccl-tests counts them), so
// the three figures compare directly. The first call (cold: connections, allocation)
// is reported apart; the rest as median and best.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    ranks: { type: "string", default: "2" },
    mb: { type: "string", default: "100" },
    calls: { type: "string", default: "5" },
    paths: { type: "string", default: "shm,tcp,gloo" },
    collectives: { type: "string", default: "allreduce,reducescatter,allgather" },
  },
});
// A rank started by another script (hosts-sync.mjs, on network namespaces) gets its sizes and rank 0's host from the environment.
const ranks = Number(process.env.BENCH_RANKS ?? args.ranks);
// Whole f32 chunks per rank, so that reduce-scatter and all-gather split the buffer evenly.
const requested = process.env.BENCH_BYTES ? Number(process.env.BENCH_BYTES) : Number(args.mb) * 1e6;
const chunk = Math.round(requested / 4 / ranks);
const bytes = chunk * 4 * ranks;
const collectives = (process.env.BENCH_COLLECTIVES ?? args.collectives).split(",");
const calls = Number(process.env.BENCH_CALLS ?? args.calls);
const host = process.env.BENCH_HOST ?? "127.0.0.1";

async function load() {
  const url = (pkg) => new URL(`../../packages/${pkg}/dist/index.js`, import.meta.url).href;
  return Promise.all([import(url("contract")), import(url("distributed"))]).catch((cause) => {
    console.error('bench: @kiln/distributed is not built; run `pnpm --filter "@kiln/distributed..." build` first');
    throw cause;
  });
}

const TRANSPORT = {
  shm: "cpu sync: shared memory, host staging, slices summed in rank order",
  tcp: `cpu sync: tcp ${host === "127.0.0.1" ? "loopback " : ""}star, host staging, sum at rank 0 in rank order`,
  gloo: `gloo sync: Gloo tcp ${host === "127.0.0.1" ? "loopback " : ""}ring, host staging`,
};

async function rank(r, port, kind) {
  const [{ createReferenceBackend }, { createCpuCommunicator, createGlooCommunicator }] = await load();
  const o = { rank: r, worldSize: ranks, host, port, timeoutMs: 600_000 };
  const comm = kind === "gloo" ? await createGlooCommunicator(o) : await createCpuCommunicator({ ...o, sharedMemory: kind === "shm" });
  if (kind === "shm" && comm.dataPath !== "shared memory") throw new Error(`bench: no shared memory here: ${comm.dataPath}`);
  const backend = createReferenceBackend();
  const buffer = backend.alloc(bytes);
  backend.upload(buffer, new Float32Array(bytes / 4).fill(r + 1));
  const at = { buffer, byteOffset: 0 };
  const CALL = {
    allreduce: () => comm.allReduce(backend, at, bytes / 4, "f32", "sum"),
    reducescatter: () => comm.reduceScatter(backend, at, chunk, "f32", "sum"),
    allgather: () => comm.allGather(backend, at, chunk * 4),
  };
  for (const collective of collectives) {
    if (!CALL[collective]) throw new Error(`bench: unknown collective ${collective} (allreduce, reducescatter, allgather)`);
    backend.upload(buffer, new Float32Array(bytes / 4).fill(r + 1));
    const seconds = [];
    for (let i = 0; i <= calls; i++) {
      await comm.barrier();
      const t0 = performance.now();
      await CALL[collective]();
      seconds.push((performance.now() - t0) / 1000);
    }
    const check = new Float32Array(1);
    await backend.download({ buffer, byteOffset: r * chunk * 4 }, check);
    if (r !== 0) continue;
    const [cold, ...warm] = seconds;
    const sorted = [...warm].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)];
    const gbps = (s) => Number((bytes / s / 1e9).toFixed(3));
    console.log(JSON.stringify({
      bench: "allreduce-cpu", collective, path: kind, transport: TRANSPORT[kind], ranks, bytes, calls,
      cold_seconds: Number(cold.toFixed(4)), median_seconds: Number(median.toFixed(4)), best_seconds: Number(sorted[0].toFixed(4)),
      gb_per_s_median: gbps(median), gb_per_s_best: gbps(sorted[0]), gb_per_s_cold: gbps(cold),
      checked: Number.isFinite(check[0]),
    }));
  }
  await comm.barrier();
  await comm.close();
}

if (process.env.BENCH_RANK !== undefined) {
  await rank(Number(process.env.BENCH_RANK), Number(process.env.BENCH_PORT), process.env.BENCH_SYNC);
} else {
  const [, { freePort, glooStatus, sharedMemoryStatus }] = await load();
  const script = fileURLToPath(import.meta.url);
  for (const kind of args.paths.split(",")) {
    const status = kind === "gloo" ? glooStatus() : kind === "shm" ? sharedMemoryStatus() : { available: true };
    if (!status.available) {
      console.log(JSON.stringify({ bench: "allreduce-cpu", path: kind, skipped: status.reason }));
      continue;
    }
    const port = await freePort();
    const children = Array.from({ length: ranks }, (_, r) =>
      spawn(process.execPath, [script, ...process.argv.slice(2)], { env: { ...process.env, BENCH_RANK: String(r), BENCH_PORT: String(port), BENCH_SYNC: kind }, stdio: "inherit" }),
    );
    const codes = await Promise.all(children.map((c) => new Promise((resolve) => c.on("exit", (code) => resolve(code)))));
    process.exitCode ||= codes.find((c) => c !== 0) ?? 0;
  }
}
