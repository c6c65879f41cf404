import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

// A machine with no C++ compiler: the build skips the addon with one line and records why,
// and the package (its dist/ bundle, as a user runs it) says so and runs the WebAssembly kernels.

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-native-build-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** A PATH holding node and nothing else: no c++, g++, clang++ or cmake. */
function nodeOnlyPath(): string {
  const bin = path.join(scratch, "bin");
  fs.mkdirSync(bin, { recursive: true });
  fs.symlinkSync(process.execPath, path.join(bin, "node"));
  return bin;
}

function run(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, args, { cwd: pkgDir, encoding: "utf8", env: { ...env, HOME: os.tmpdir() }, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("building without a C++ compiler", () => {
  const buildDir = path.join(scratch, "build");
  const env = { PATH: nodeOnlyPath(), KILN_NATIVE_BUILD_DIR: buildDir };

  it("skips the addon with a one-line message and records the reason", () => {
    const r = run(["scripts/build-native.mjs"], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split("\n")).toEqual([expect.stringMatching(/^build-native: no C\+\+ compiler was found .*; the native kernels are not built/)]);
    const info = JSON.parse(fs.readFileSync(path.join(buildDir, "build-info.json"), "utf8"));
    expect(info).toMatchObject({ built: false, missingToolchain: true, reason: expect.stringMatching(/^addon not built: no C\+\+ compiler was found/) });
    expect(fs.existsSync(path.join(buildDir, "Release"))).toBe(false);
  });

  it("the built package then says why in capabilities and runs the matmul on WebAssembly", () => {
    const dist = new URL("../dist/index.js", import.meta.url).href;
    const script = `
      const { createWasmBackend } = await import(${JSON.stringify(dist)});
      const b = await createWasmBackend({ threads: 2, measurePeak: false });
      const [a, x, c] = [16, 16, 16].map((n) => b.alloc(n));
      b.upload(a, new Float32Array([1, 2, 3, 4]));
      b.upload(x, new Float32Array([5, 6, 7, 8]));
      b.kernels.matmul({ a, b: x, c, m: 2, n: 2, k: 2, dtype: "f32" });
      const out = new Float32Array(4);
      await b.download(c, out);
      console.log(JSON.stringify({ native: b.capabilities().device.native, name: b.capabilities().device.name, c: Array.from(out) }));
      b.dispose();`;
    const r = run(["--input-type=module", "-e", script], env);
    expect(r.code, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    expect(got.native).toEqual({ kernels: [], reason: expect.stringMatching(/^addon not built: no C\+\+ compiler was found/) });
    expect(got.name).not.toContain("native");
    expect(got.c).toEqual([19, 22, 43, 50]);
  });
});
