import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { PACKAGE_ROOT, buildSimProgram, simToolchain } from "./support/sim-toolchain.js";

// Kernels with the classic bugs (test/sim/broken_kernels.cu), run on the simulator:
// each bug must show, and its correct twin must pass.
const tc = simToolchain();
const skip = "missing" in tc ? tc.missing : undefined;

describe.skipIf(skip)(`the CUDA simulator catches kernel bugs${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let plain = "";
  let asan = "";
  beforeAll(() => {
    if ("missing" in tc) return;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-sim-bugs-"));
    const source = path.join(PACKAGE_ROOT, "test", "sim", "broken_kernels.cu");
    plain = buildSimProgram(tc, source, path.join(dir, "plain"));
    asan = buildSimProgram(tc, source, path.join(dir, "asan"), ["-fsanitize=address", "-fno-omit-frame-pointer"]);
  }, 120_000);

  const run = (program: string, mode: string) => {
    const r = spawnSync(program, [mode], { encoding: "utf8", env: { ...process.env, ASAN_OPTIONS: "detect_stack_use_after_return=0:detect_leaks=0" } });
    return { status: r.status, signal: r.signal, out: `${r.stdout}${r.stderr}` };
  };

  it("a missing __syncthreads reads poisoned shared memory and gets every block wrong", () => {
    expect(run(plain, "sum-barrier").out).toContain("with barrier: 0 of 3 blocks wrong");
    expect(run(plain, "sum-no-barrier").out).toContain("without barrier: 3 of 3 blocks wrong");
  });

  it("an out-of-bounds write is reported by AddressSanitizer at its source line", () => {
    expect(run(asan, "copy").status).toBe(0);
    const r = run(asan, "copy-off-by-one");
    expect(r.status).not.toBe(0);
    expect(r.out).toContain("heap-buffer-overflow");
    const line = fs.readFileSync(path.join(PACKAGE_ROOT, "test", "sim", "broken_kernels.cu"), "utf8").split("\n").findIndex((l) => l.includes("LINE-OOB")) + 1;
    expect(r.out).toContain(`broken_kernels.cu:${line}`);
  });

  it("a divergent __syncthreads aborts naming both barrier lines", () => {
    const r = run(plain, "divergent");
    expect(r.signal).toBe("SIGABRT");
    expect(r.out).toMatch(/divergent __syncthreads: thread 0 waits at \S*broken_kernels.cu:\d+, thread 1 at \S*broken_kernels.cu:\d+/);
    expect(r.out).not.toContain("was not caught");
  });

  it("tensor-core fragments compute the product, and reading a stored tile before __syncwarp is caught", () => {
    expect(run(plain, "wmma-sync").out).toContain("with __syncwarp: 0 of 256 elements wrong");
    expect(run(plain, "wmma-no-sync").out).toMatch(/without __syncwarp: (\d+) of 256 elements wrong/);
    expect(run(plain, "wmma-no-sync").out).not.toContain("without __syncwarp: 0 of");
  });

  it("mma.sync, ldmatrix and cp.async follow the PTX layouts; reads before the wait or the barrier are caught", () => {
    for (const program of [plain, asan]) expect(run(program, "mma").out).toContain("mma cp.async, wait, barrier: 0 of 128 elements wrong, 0 NaN");
    // Without cp.async.wait_group the fragments read the poison the copies left.
    expect(run(plain, "mma-no-wait").out).toContain("mma cp.async without wait: 128 of 128 elements wrong, 128 NaN");
    // Without __syncthreads after the wait a lane reads rows another lane's wait landed.
    const r = run(plain, "mma-no-barrier");
    expect(r.signal).toBe("SIGABRT");
    expect(r.out).toMatch(/ldmatrix at \S*broken_kernels.cu:\d+: thread \d+ reads shared bytes at \S+ that thread \d+'s cp.async landed at its cp.async.wait_group, with no __syncthreads since/);
    // A fragment layout bug (A's middle matrices swapped) gives wrong elements.
    expect(run(plain, "mma-swapped").out).toMatch(/mma swapped ldmatrix rows: [1-9]\d* of 128 elements wrong, 0 NaN/);
    const half = run(plain, "mma-half-warp");
    expect(half.signal).toBe("SIGABRT");
    expect(half.out).toMatch(/ldmatrix at \S*broken_kernels.cu:\d+ needs all 32 lanes of the warp: lane 16 of warp 0 is not in the block/);
  });

  it("wgmma follows the descriptor, swizzle and fragment layouts; a missing proxy fence, wait or warpgroup is caught", () => {
    for (const program of [plain, asan]) expect(run(program, "wgmma").out).toContain("wgmma: 0 of 8192 elements wrong");
    // The products read shared memory when the wait retires them, as the hardware may.
    expect(run(plain, "wgmma-overwrite").out).toMatch(/wgmma with its tile overwritten before the wait: [1-9]\d* of 8192 elements wrong/);
    const aborts: [string, RegExp][] = [
      ["wgmma-no-fence", /wgmma at \S*broken_kernels.cu:\d+: thread \d+'s cp.async bytes landed with no fence.proxy.async since/],
      ["wgmma-no-wait", /thread \d+ exits with the wgmma at \S*broken_kernels.cu:\d+ still in flight/],
      ["wgmma-divergent-desc", /wgmma.mma_async at \S*broken_kernels.cu:\d+: threads \d+ and \d+ of warpgroup 0 give different operands/],
      ["wgmma-three-warps", /wgmma.mma_async at \S*broken_kernels.cu:\d+ needs all 128 threads of the warpgroup: thread 96 of warpgroup 0 is not in the block/],
    ];
    for (const [mode, message] of aborts) {
      const r = run(plain, mode);
      expect(r.signal, mode).toBe("SIGABRT");
      expect(r.out, mode).toMatch(message);
    }
  });

  it("warps in turn expose a double buffer overwritten before the other warp read it (a missing closing barrier)", () => {
    expect(run(plain, "double-buffer").out).toContain("double buffer with closing barrier, warps in turn: 0 of 64 threads wrong");
    // The default schedule keeps warps in step at every warp exchange: the bug hides there.
    expect(run(plain, "double-buffer-no-barrier").out).toContain("without closing barrier, default schedule: 0 of 64 threads wrong");
    expect(run(plain, "double-buffer-no-barrier-in-turn").out).toMatch(/without closing barrier, warps in turn: [1-9]\d* of 64 threads wrong/);
  });

  it("warp shuffles exchange values across the lanes of each warp (under ASan too)", () => {
    for (const program of [plain, asan]) expect(run(program, "warp-reduce").out).toContain("warp sums: 496 1520 2544");
  });
});
