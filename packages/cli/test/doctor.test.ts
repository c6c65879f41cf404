import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { main } from "@kiln/cli";
import { glooStatus } from "@kiln/distributed";

// doctor measures the CPU's peak once and caches it: in a cache folder of the tests' own.
let cache: string;
const savedCache = process.env.XDG_CACHE_HOME;
beforeAll(async () => {
  cache = await mkdtemp(path.join(tmpdir(), "kiln-doctor-"));
  process.env.XDG_CACHE_HOME = cache;
});
afterAll(async () => {
  if (savedCache === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = savedCache;
  await rm(cache, { recursive: true, force: true });
});

async function run(argv: string[]) {
  let out = "";
  let err = "";
  const o = vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), true));
  try {
    const code = await main(argv);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
    process.exitCode = undefined;
  }
}

describe("kiln doctor", () => {
  it("reports the CPU kernels it loaded and what it found of CUDA", async () => {
    const { code, out } = await run(["doctor"]);
    expect(code).toBe(0);
    expect(out).toMatch(/cpu kernels\s+WebAssembly (relaxed SIMD|SIMD128).*\d+ thread/);
    expect(out).toMatch(/nvidia driver\s+/);
    expect(out).toMatch(/NCCL\s+(found|not found)/);
    const gloo = glooStatus();
    expect(out).toMatch(
      gloo.available
        ? /sync backends\s+cpu \(ranks on this machine through shared memory, others over TCP\): available; gloo \(Gloo's TCP ring; the default across machines\): available; nccl(: not available| \(GPU ranks)/
        : /sync backends\s+cpu \(ranks on this machine through shared memory, others over TCP\): available; gloo: not available \(.*libgloo-dev.*\); nccl(: not available| \(GPU ranks)/,
    );
    expect(out).toMatch(/^ready: kiln can train on the CPU/m);
  });

  it("prints the same report as JSON", async () => {
    const { code, out } = await run(["doctor", "--json"]);
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.wasm.ok).toBe(true);
    expect(report.wasm.threads).toBeGreaterThanOrEqual(1);
    expect(typeof report.cuda.driver.found).toBe("boolean");
    expect(report.sync.gloo.available).toBe(glooStatus().available);
  });

  it("measures the CPU's peak once, then shows the cached figure", async () => {
    await rm(path.join(cache, "kiln", "cpu-peak.json"), { force: true });
    const first = await run(["doctor", "--json"]);
    const second = await run(["doctor", "--json"]);
    const a = JSON.parse(first.out).wasm.peak;
    const b = JSON.parse(second.out).wasm.peak;
    expect(first.err).toMatch(/^measuring this CPU's peak FLOP\/s once/);
    expect(a).toMatchObject({ cached: false, file: path.join(cache, "kiln", "cpu-peak.json") });
    expect(a.flopsPerSecond).toBeGreaterThan(1e8);
    expect(second.err).toBe("");
    expect(b).toEqual({ ...a, cached: true });
    const text = await run(["doctor"]);
    expect(text.out).toMatch(new RegExp(`cpu peak\\s+${(a.flopsPerSecond / 1e9).toFixed(1)} GFLOP/s f32 on \\d+ threads?, for MFU \\(measured \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC, kept in `));
  });

  it("exits non-zero on an unknown command and says so in one error", async () => {
    const { code, err } = await run(["bake"]);
    expect(code).toBe(1);
    expect(err).toBe("kiln: ConfigError in kiln: kiln has no command bake\n  what to do: see kiln --help\n");
  });
});
