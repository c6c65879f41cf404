import { describe, expect, it, vi } from "vitest";
import { main } from "@kiln/cli";

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
    expect(out).toMatch(/^ready: kiln can train on the CPU/m);
  });

  it("prints the same report as JSON", async () => {
    const { code, out } = await run(["doctor", "--json"]);
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.wasm.ok).toBe(true);
    expect(report.wasm.threads).toBeGreaterThanOrEqual(1);
    expect(typeof report.cuda.driver.found).toBe("boolean");
  });

  it("exits non-zero on an unknown command and says so", async () => {
    const { code, err } = await run(["bake"]);
    expect(code).not.toBe(0);
    expect(err).toMatch(/unknown command 'bake'/);
  });
});
