import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildFakeNccl, fakeNcclSkipReason } from "./support/fake-nccl.js";
import { PACKAGE_ROOT } from "./support/sim-toolchain.js";
import { simulatorSkipReason } from "./support/simulator.js";

// Reduce-scatter and all-gather (in place) over 2 and 3 ranks in separate processes,
// each with its own simulator device, through the fake NCCL (test/support/fake_nccl.c).
// The ranks run the built package (dist/index.js), as a launcher's processes would.
const DIST = path.join(PACKAGE_ROOT, "dist", "index.js");
const distReady = fs.existsSync(DIST) && fs.readFileSync(DIST, "utf8").includes("reduceScatter");
const skip =
  simulatorSkipReason() ??
  fakeNcclSkipReason() ??
  (distReady ? undefined : "dist/index.js is missing or older than the NCCL sources (run 'pnpm --filter @kiln/kernels-cuda build:js')");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-nccl-scatter-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const COUNTS = [1, 7, 4099];

// Element i of the whole buffer on rank r is base(i) * (r + 1), so with W ranks chunk r
// sums to base(i) * W (W + 1) / 2; every value here is exact in f32 and bf16. Rank r
// reads back its chunk after a kernel enqueued behind the collective doubles it.
// All-gather: rank r's chunk r holds bytes (j * 13 + r * 101 + 1) mod 256, the other
// chunks 0xee until gathered. Bad calls come first: they must not reach NCCL (a
// collective one rank skips would leave the others waiting).
const RANK = `
import { createCudaSimBackend, openNcclCollectives } from ${JSON.stringify(DIST)};
const [idHex, rankText, worldText] = process.argv.slice(-3);
const rank = Number(rankText), worldSize = Number(worldText);
const backend = createCudaSimBackend();
const nccl = await openNcclCollectives(backend, { uniqueId: Uint8Array.from(Buffer.from(idHex, "hex")), rank, worldSize, timeoutMs: 30000 });
const base = (i) => ((i * 7) % 23) - 11;
const size = { f32: 4, bf16: 2 };
const bf16 = (v) => new Uint32Array(Float32Array.of(v).buffer)[0] >>> 16; // exact values only
const encode = (x, dtype) => new Uint8Array((dtype === "f32" ? Float32Array.from(x) : Uint16Array.from(x, bf16)).buffer);
const decode = (b, dtype) =>
  dtype === "f32"
    ? Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4))
    : Array.from(new Uint16Array(b.buffer, b.byteOffset, b.length / 2), (h) => new Float32Array(new Uint32Array([h << 16]).buffer)[0]);
const out = { errors: [], reduceScatter: {}, allGather: {} };

const small = backend.alloc(worldSize * 16 - 4);
for (const call of [
  () => nccl.reduceScatter(small, 4, "f32", "sum"),
  () => nccl.reduceScatter({ buffer: small, byteOffset: 4 }, 8, "bf16", "mean"),
  () => nccl.allGather(small, 16),
  () => nccl.allGather({ buffer: small, byteOffset: 1 }, 16 - 1 / worldSize),
]) {
  const e = await call().then(() => undefined, (e) => e);
  out.errors.push(e ? e.name + ": " + e.message : "resolved");
}
backend.free(small);

for (const n of ${JSON.stringify(COUNTS)}) for (const dtype of ["f32", "bf16"]) for (const op of ["sum", "mean"]) {
  const offset = 8;
  const buf = backend.alloc(offset + worldSize * n * size[dtype]);
  const at = { buffer: buf, byteOffset: offset };
  backend.upload(at, encode(Array.from({ length: worldSize * n }, (_, i) => base(i) * (rank + 1)), dtype));
  const done = nccl.reduceScatter(at, n, dtype, op);
  const mine = { buffer: buf, byteOffset: offset + rank * n * size[dtype] };
  backend.kernels.scale({ x: mine, out: mine, n, alpha: 2, dtype });
  await done;
  const got = new Uint8Array(n * size[dtype]);
  await backend.download(mine, got);
  out.reduceScatter[n + " " + dtype + " " + op] = decode(got, dtype);
  backend.free(buf);
}

for (const bytes of ${JSON.stringify(COUNTS)}) {
  const buf = backend.alloc(3 + worldSize * bytes);
  const at = { buffer: buf, byteOffset: 3 };
  const data = new Uint8Array(worldSize * bytes).fill(0xee);
  for (let j = 0; j < bytes; j++) data[rank * bytes + j] = (j * 13 + rank * 101 + 1) & 0xff;
  backend.upload(at, data);
  await nccl.allGather(at, bytes);
  const got = new Uint8Array(worldSize * bytes);
  await backend.download(at, got);
  out.allGather[bytes] = Buffer.from(got).toString("hex");
  backend.free(buf);
}
nccl.close();
backend.dispose();
console.log(JSON.stringify(out));
`;

interface RankOutput {
  errors: string[];
  reduceScatter: Record<string, number[]>;
  allGather: Record<string, string>;
}

function runRank(lib: string, idHex: string, rank: number, worldSize: number): Promise<RankOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", RANK, idHex, String(rank), String(worldSize)], {
      env: { ...process.env, KILN_NCCL_LIBRARY: lib },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d));
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(stdout) as RankOutput) : reject(new Error(`rank ${rank} exited with ${code}:\n${stderr}`))));
  });
}

const base = (i: number) => ((i * 7) % 23) - 11;

describe.skipIf(skip)(`reduce-scatter and all-gather over ranks in separate processes${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let lib: string;
  let uniqueId: () => Promise<string>;
  beforeAll(() => {
    lib = buildFakeNccl(dir, "libnccl.so.2");
    // The unique id is made once (rank 0's job) and handed to every rank, as the rendezvous does.
    uniqueId = async () => {
      const saved = process.env.KILN_NCCL_LIBRARY;
      process.env.KILN_NCCL_LIBRARY = lib;
      try {
        const { ncclUniqueId } = await import("../src/index.js");
        return Buffer.from(ncclUniqueId()).toString("hex");
      } finally {
        if (saved === undefined) delete process.env.KILN_NCCL_LIBRARY;
        else process.env.KILN_NCCL_LIBRARY = saved;
      }
    };
  });

  for (const worldSize of [2, 3]) {
    it(`${worldSize} ranks: each rank's chunk gets the ranks' sum or mean (f32, bf16), every chunk gets its rank's bytes, bad calls are refused`, async () => {
      const id = await uniqueId();
      const outputs = await Promise.all([...Array(worldSize).keys()].map((rank) => runRank(lib, id, rank, worldSize)));
      const sumFactor = (worldSize * (worldSize + 1)) / 2; // sum over r of (r + 1)
      outputs.forEach((o, rank) => {
        expect(o.errors).toEqual([
          `KernelArgumentError: reduceScatter of ${worldSize} x 4 f32 needs bytes [0, ${worldSize * 16}) of a ${worldSize * 16 - 4}-byte buffer`,
          `KernelArgumentError: reduceScatter of ${worldSize} x 8 bf16 needs bytes [4, ${4 + worldSize * 16}) of a ${worldSize * 16 - 4}-byte buffer`,
          `KernelArgumentError: allGather of ${worldSize} x 16 bytes needs bytes [0, ${worldSize * 16}) of a ${worldSize * 16 - 4}-byte buffer`,
          `KernelArgumentError: allGather's byte count (per rank) must be an integer between 0 and ${Number.MAX_SAFE_INTEGER}, got ${16 - 1 / worldSize}`,
        ]);
        for (const n of COUNTS) {
          const chunk = Array.from({ length: n }, (_, j) => base(rank * n + j));
          for (const dtype of ["f32", "bf16"]) {
            expect(o.reduceScatter[`${n} ${dtype} sum`], `rank ${rank}, ${n} ${dtype} sum`).toEqual(chunk.map((b) => 2 * b * sumFactor));
            expect(o.reduceScatter[`${n} ${dtype} mean`], `rank ${rank}, ${n} ${dtype} mean`).toEqual(chunk.map((b) => (2 * b * sumFactor) / worldSize));
          }
          const gathered = new Uint8Array(worldSize * n);
          for (let r = 0; r < worldSize; r++) for (let j = 0; j < n; j++) gathered[r * n + j] = (j * 13 + r * 101 + 1) & 0xff;
          expect(o.allGather[n], `rank ${rank}, all-gather of ${n} bytes`).toBe(Buffer.from(gathered).toString("hex"));
        }
      });
    }, 120_000);
  }
});
