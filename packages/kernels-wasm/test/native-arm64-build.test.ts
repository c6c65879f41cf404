import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

// The arm64 build of the native kernels, checked with Debian's cross compiler
// (tooling/bootstrap.sh installs it on x86-64 where it can):
//   - scripts/build-native.mjs --cross arm64 builds an AArch64 shared object that registers
//     the Node-API module and holds the NEON kernels (their FMA loop in vector fmla).
//   - native/test/kernel_check.cc, the same kernels in a static program run by qemu-aarch64
//     (on arm64, by itself): conversions, lane rules, matmul bits against scalar loops in the
//     kernels' summation order, attention, norms and cross-entropy against f64; and where the
//     bits do not depend on the lane count (conversions, matmul, GELU) the same digests as
//     the program's AVX2 build on an x86-64 host.

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-native-arm64-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const CROSS_CXX = "aarch64-linux-gnu-g++";
const EM_AARCH64 = 183;

function runs(cmd: string, args = ["--version"]): boolean {
  return spawnSync(cmd, args, { encoding: "utf8" }).status === 0;
}

function run(cmd: string, args: string[], timeout: number) {
  const r = spawnSync(cmd, args, { cwd: pkgDir, encoding: "utf8", timeout, maxBuffer: 64 * 2 ** 20 });
  return { code: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? `\n${r.error.message}` : ""}` };
}

const crossSkip = !runs(CROSS_CXX)
  ? `no ${CROSS_CXX}: apt-get install g++-aarch64-linux-gnu to check the arm64 build`
  : !runs("cmake")
    ? "no cmake"
    : undefined;
/** Whether the static arm64 program runs under qemu-aarch64 (on arm64 it runs itself). */
const underQemu = process.arch !== "arm64";
const qemuSkip = crossSkip ?? (!underQemu || runs("qemu-aarch64") ? undefined : "no qemu-aarch64: apt-get install qemu-user to run the NEON kernels");
const hostFlags = fs.existsSync("/proc/cpuinfo") ? fs.readFileSync("/proc/cpuinfo", "utf8") : "";
const avx2Skip =
  process.arch !== "x64" || !["avx2", "fma", "f16c"].every((f) => new RegExp(`\\b${f}\\b`).test(hostFlags))
    ? "this machine is not an x86-64 with AVX2, FMA and F16C"
    : !runs("c++")
      ? "no host c++"
      : undefined;

/** The ELF header fields that say what a file is built for. */
function elfHeader(file: string) {
  const b = fs.readFileSync(file).subarray(0, 64);
  return {
    magic: b.subarray(0, 4).toString("latin1"),
    bits: b[4] === 2 ? 64 : 32,
    littleEndian: b[5] === 1,
    type: b.readUInt16LE(16), // 3: shared object
    machine: b.readUInt16LE(18),
  };
}

describe.skipIf(crossSkip !== undefined)(`the arm64 addon, cross-compiled${crossSkip ? ` (skipped: ${crossSkip})` : ""}`, () => {
  it("is an AArch64 shared object that registers the Node-API module and holds the NEON kernels", () => {
    const out = path.join(scratch, "addon");
    const built = run(process.execPath, ["scripts/build-native.mjs", "--cross", "arm64", "--out", out], 280_000);
    expect(built.code, built.out).toBe(0);
    expect(built.out).toMatch(/build-native: built .*kiln_native\.node for arm64 with aarch64-linux-gnu-g\+\+/);
    const addon = path.join(out, "Release", "kiln_native.node");
    expect(elfHeader(addon)).toEqual({ magic: "\x7fELF", bits: 64, littleEndian: true, type: 3, machine: EM_AARCH64 });
    expect(JSON.parse(fs.readFileSync(path.join(out, "build-info.json"), "utf8"))).toMatchObject({ built: true, cross: "arm64" });

    const dynamic = run("aarch64-linux-gnu-nm", ["-D", "--defined-only", addon], 30_000);
    expect(dynamic.out).toMatch(/ T napi_register_module_v1$/m);
    const symbols = run("aarch64-linux-gnu-nm", [addon], 30_000).out;
    expect(symbols).toMatch(/ t _ZN11kiln_native12neon_kernelsEv$/m);
    const ceiling = symbols.match(/ t (_ZN11kiln_native12_GLOBAL__N_1L7ceilingINS0_4NeonEEEfl)$/m)?.[1];
    expect(ceiling, "ceiling<Neon> in the symbol table").toBeDefined();
    const code = run("aarch64-linux-gnu-objdump", ["-d", `--disassemble=${ceiling}`, addon], 30_000).out;
    expect(code.match(/\bfmla\s+v\d+\.4s/g)?.length ?? 0).toBeGreaterThanOrEqual(16); // its 16 chains, 4 lanes each
  }, 300_000);
});

describe.skipIf(qemuSkip !== undefined)(`the NEON kernels in a static program${underQemu ? " under qemu-aarch64" : ""}${qemuSkip ? ` (skipped: ${qemuSkip})` : ""}`, () => {
  const flags = ["-std=c++17", "-O2", "-ffp-contract=off", "-fno-math-errno", "-Wall", "-Wextra", "-Inative/src", "native/test/kernel_check.cc"];
  let neon: string | undefined;

  it("pass their checks: conversions, lane rules, matmul bits, attention, norms and cross-entropy", () => {
    const program = path.join(scratch, "kernel_check-arm64");
    const built = run(CROSS_CXX, [...flags, "-static", "-o", program], 240_000);
    expect(built.code, built.out).toBe(0);
    expect(built.out).not.toMatch(/warning/);
    expect(elfHeader(program).machine).toBe(EM_AARCH64);
    const r = underQemu ? run("qemu-aarch64", [program], 120_000) : run(program, [], 120_000);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/^isa neon\n(digest \w+ [0-9a-f]{16}\n){3}ok\n$/);
    neon = r.out;
  }, 300_000);

  it.skipIf(avx2Skip !== undefined)(`give the AVX2 kernels' bits where the lane count does not matter${avx2Skip ? ` (skipped: ${avx2Skip})` : ""}`, () => {
    expect(neon, "the NEON run above").toBeDefined();
    const program = path.join(scratch, "kernel_check-avx2");
    const built = run("c++", [...flags, "-mavx2", "-mfma", "-mf16c", "-o", program], 240_000);
    expect(built.code, built.out).toBe(0);
    const r = run(program, [], 60_000);
    expect(r.code, r.out).toBe(0);
    const digests = (out: string) => out.split("\n").filter((l) => l.startsWith("digest "));
    expect(r.out).toMatch(/^isa avx2\n/);
    expect(digests(neon!)).toEqual(digests(r.out));
  }, 300_000);
});
