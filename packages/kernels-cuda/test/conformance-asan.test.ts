import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT, simToolchain } from "./support/sim-toolchain.js";

// The conformance run with every kernel path (test/conformance-sim.test.ts) on the
// simulator built with AddressSanitizer: any out-of-bounds access, use-after-free or
// misuse of shared memory in a kernel stops the run with a report. It runs the blocks
// and threads in reverse order with warps in turn (KILN_TEST_SIM_REVERSED=1), the
// plain simulator runs them in order: both orders, each pass once. The order changes
// when a kernel touches an address, not which addresses it touches. The cases run as two
// processes side by side, each taking every other case (KILN_TEST_SIM_PART). Slow (minutes).
const tc = simToolchain();
const skip = "missing" in tc ? tc.missing : undefined;

describe.skipIf(skip)(`conformance under AddressSanitizer${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("passes every case with no AddressSanitizer report", async () => {
    if ("missing" in tc) return;
    const build = spawnSync(process.execPath, [path.join(PACKAGE_ROOT, "scripts", "build-addon.mjs"), "asan"], { cwd: PACKAGE_ROOT, encoding: "utf8", env: { ...process.env, KILN_KERNEL_FILES: "" } });
    expect(build.status, `${build.stdout}\n${build.stderr}`).toBe(0);
    const runtime = spawnSync(tc.cxx, ["-print-file-name=libclang_rt.asan-x86_64.so"], { encoding: "utf8" }).stdout.trim();
    const env: Record<string, string | undefined> = {
      ...process.env,
      KILN_CUDA_SIM_ADDON: path.join(PACKAGE_ROOT, "build-sim-asan", "Release", "kiln_cuda_sim.node"),
      LD_PRELOAD: runtime,
      // Node is not instrumented: no leak report at exit, no fake stacks across fiber switches,
      // and a small quarantine so a conformance run stays within memory.
      ASAN_OPTIONS: "detect_leaks=0:detect_stack_use_after_return=0:quarantine_size_mb=16:halt_on_error=1",
      KILN_TEST_RESULTS: undefined,
      KILN_TEST_SIM_REVERSED: "1",
    };
    const vitest = path.join(path.dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
    const parts = 2;
    const runs = await Promise.all(
      Array.from({ length: parts }, (_, i) => runToEnd(process.execPath, [vitest, "run", "test/conformance-sim.test.ts"], { ...env, KILN_TEST_SIM_PART: `${i + 1}/${parts}` })),
    );
    for (const r of runs) {
      expect(r.out).not.toMatch(/ERROR: AddressSanitizer/);
      expect(r.status, r.out.slice(-4000)).toBe(0);
      expect(r.out).toMatch(/kernels-cuda: [1-9]\d* passed, 0 failed, 0 skipped/);
    }
  }, 1_200_000);
});

/** Runs a command to its end without blocking the event loop: its exit status and all it printed. */
function runToEnd(command: string, args: string[], env: Record<string, string | undefined>): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: PACKAGE_ROOT, env });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, out }));
  });
}
