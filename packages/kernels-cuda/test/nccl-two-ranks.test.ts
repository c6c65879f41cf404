import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildFakeNccl, fakeNcclSkipReason } from "./support/fake-nccl.js";
import { PACKAGE_ROOT } from "./support/sim-toolchain.js";
import { simulatorSkipReason } from "./support/simulator.js";

// Two ranks in two processes, each with its own simulator device, all-reducing and
// broadcasting through the fake NCCL (its ranks meet in POSIX shared memory named
// by the unique id). The ranks run the built package (dist/index.js), as a
// launcher's processes would.
const DIST = path.join(PACKAGE_ROOT, "dist", "index.js");
const distReady = fs.existsSync(DIST) && fs.readFileSync(DIST, "utf8").includes("openNcclCollectives");
const skip =
  simulatorSkipReason() ??
  fakeNcclSkipReason() ??
  (distReady ? undefined : "dist/index.js is missing or older than the NCCL sources (run 'pnpm --filter @kiln/kernels-cuda build:js')");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-nccl-ranks-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// One rank: v[i] = (i % 8) - 4 on every rank; rank r's element i after each step:
//   allReduce sum, then (enqueued after it) scale 0.5      -> v         (2 v halved)
//   scale by rank + 1, allReduce mean                      -> 1.5 v     ((v + 2 v) / 2)
//   rank 1 negates, broadcast from rank 1, then scale 2    -> -3 v
// Every value is exact in f32, bf16 and f16. Prints { dtype: [after mean, at the end] } as JSON.
const RANK = `
import { createCudaSimBackend, openNcclCollectives } from ${JSON.stringify(DIST)};
const [idHex, rankText] = process.argv.slice(-2);
const rank = Number(rankText);
const backend = createCudaSimBackend();
const nccl = await openNcclCollectives(backend, { uniqueId: Uint8Array.from(Buffer.from(idHex, "hex")), rank, worldSize: 2, timeoutMs: 30000 });
const n = 301, offset = 16;
const encode = (x, dtype) => {
  if (dtype === "f32") return new Uint8Array(Float32Array.from(x).buffer);
  const bits = new Uint16Array(x.length);
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (let i = 0; i < x.length; i++) {
    f[0] = x[i];
    if (dtype === "bf16") bits[i] = u[0] >>> 16;  // exact values only
    else bits[i] = toF16(x[i]);
  }
  return new Uint8Array(bits.buffer);
};
const toF16 = (v) => { // exact small values: sign, exponent, 10-bit mantissa
  if (v === 0) return Object.is(v, -0) ? 0x8000 : 0;
  const s = v < 0 ? 0x8000 : 0; v = Math.abs(v);
  const e = Math.floor(Math.log2(v));
  return s | ((e + 15) << 10) | Math.round((v / 2 ** e - 1) * 1024);
};
const fromF16 = (h) => (h & 0x8000 ? -1 : 1) * ((h & 0x7c00) === 0 ? (h & 0x3ff) * 2 ** -24 : (1 + (h & 0x3ff) / 1024) * 2 ** (((h & 0x7c00) >> 10) - 15));
const decode = (bytes, dtype) => {
  if (dtype === "f32") return Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, n));
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  if (dtype === "f16") return Array.from(bits, fromF16);
  return Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]);
};
const out = {};
for (const dtype of ["f32", "bf16", "f16"]) {
  const size = dtype === "f32" ? 4 : 2;
  const buf = backend.alloc(offset + n * size);
  const at = { buffer: buf, byteOffset: offset };
  backend.upload(at, encode(Array.from({ length: n }, (_, i) => (i % 8) - 4), dtype));
  const summed = nccl.allReduce(at, n, dtype, "sum");
  backend.kernels.scale({ x: at, out: at, n, alpha: 0.5, dtype });
  await summed;
  backend.kernels.scale({ x: at, out: at, n, alpha: rank + 1, dtype });
  await nccl.allReduce(at, n, dtype, "mean");
  const afterMean = new Uint8Array(n * size);
  await backend.download(at, afterMean);
  if (rank === 1) backend.kernels.scale({ x: at, out: at, n, alpha: -1, dtype });
  const sent = nccl.broadcast(at, n * size, 1);
  backend.kernels.scale({ x: at, out: at, n, alpha: 2, dtype });
  await sent;
  const end = new Uint8Array(n * size);
  await backend.download(at, end);
  out[dtype] = [decode(afterMean, dtype), decode(end, dtype)];
  backend.free(buf);
}
nccl.close();
backend.dispose();
console.log(JSON.stringify(out));
`;

function runRank(lib: string, idHex: string, rank: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", RANK, idHex, String(rank)], {
      env: { ...process.env, KILN_NCCL_LIBRARY: lib },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d));
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    child.on("close", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`rank ${rank} exited with ${code}:\n${stderr}`))));
  });
}

describe.skipIf(skip)(`two ranks in two processes${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("all-reduce (sum, mean) and broadcast give every rank the same result, read by the kernels enqueued after them", async () => {
    const lib = buildFakeNccl(dir, "libnccl.so.2");
    // The unique id is made once (rank 0's job) and handed to both ranks, as the rendezvous does.
    const saved = process.env.KILN_NCCL_LIBRARY;
    process.env.KILN_NCCL_LIBRARY = lib;
    const { ncclUniqueId } = await import("../src/index.js");
    const id = Buffer.from(ncclUniqueId()).toString("hex");
    if (saved === undefined) delete process.env.KILN_NCCL_LIBRARY;
    else process.env.KILN_NCCL_LIBRARY = saved;

    const outputs = await Promise.all([runRank(lib, id, 0), runRank(lib, id, 1)]);
    const [r0, r1] = outputs.map((o) => JSON.parse(o) as Record<string, [number[], number[]]>);
    const v = Array.from({ length: 301 }, (_, i) => (i % 8) - 4);
    const signless = (a: number[]) => a.map((x) => x + 0); // -0 and 0 alike
    for (const dtype of ["f32", "bf16", "f16"]) {
      expect(signless(r0[dtype][0]), `${dtype} after the mean`).toEqual(signless(v.map((x) => 1.5 * x)));
      expect(signless(r0[dtype][1]), `${dtype} at the end`).toEqual(signless(v.map((x) => -3 * x)));
      expect(r1[dtype]).toEqual(r0[dtype]);
    }
  }, 120_000);
});
