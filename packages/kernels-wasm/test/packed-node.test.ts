import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installTarballs, packPackage } from "@kiln/tooling/packed-install";

// The package as a Node user installs it: the packed tarball alone in a fresh
// folder (no @kiln/contract, no other @kiln package). The example script must
// run as a file and through `node --input-type=module -e`, require() must fail
// saying why, and the types must stand alone and reject misuse under strict TS.
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repoRoot = path.resolve(pkgDir, "../..");
const example = fs.readFileSync(path.join(repoRoot, "examples/node-script/matmul.mjs"), "utf8");
const relaxedBuilt = fs.existsSync(path.join(pkgDir, "build/kernels-relaxed-shared.wasm"));
let tarball: string;
let app: string;

beforeAll(() => {
  const packed = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-kernels-wasm-pack-"));
  tarball = packPackage(pkgDir, packed);
  app = installTarballs("kiln-kernels-wasm-node-", [tarball]);
  fs.writeFileSync(path.join(app, "matmul.mjs"), example);
}, 60_000);
afterAll(() => {
  fs.rmSync(path.dirname(tarball), { recursive: true, force: true });
  fs.rmSync(app, { recursive: true, force: true });
});

function node(args: string[], cwd = app): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, args, { cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const matmulResult = { c: [4, 5, 10, 11], simd: relaxedBuilt ? "relaxed" : "plain", threads: os.availableParallelism() };

describe("the packed @kiln/kernels-wasm in Node", () => {
  it("carries only what its entries use", () => {
    const files = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).trim().split("\n").map((f) => f.replace(/^package\//, ""));
    const unexpected = files.filter((f) => !/^(package\.json|README\.md|dist\/(index\.js|browser\.js|thread-worker-node\.js|require\.cjs|assets\/[^/]+|types\/.+\.d\.c?ts))$/.test(f));
    expect(unexpected).toEqual([]);
    expect(files.filter((f) => f.startsWith("dist/assets/")).sort()).toEqual(
      ["thread-worker.js", ...["plain", "relaxed"].flatMap((s) => [`kernels-${s}-shared.wasm`, `kernels-${s}-single.wasm`])].map((f) => `dist/assets/${f}`).sort(),
    );
    expect(fs.readdirSync(path.join(app, "node_modules")).filter((d) => !d.startsWith("."))).toEqual(["@kiln"]);
    expect(fs.readdirSync(path.join(app, "node_modules", "@kiln"))).toEqual(["kernels-wasm"]);
  });

  it("runs examples/node-script/matmul.mjs on every core", () => {
    const r = node(["matmul.mjs"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(matmulResult);
  });

  it("runs the same code through node --input-type=module -e (the workers do not inherit those flags)", () => {
    const r = node(["--input-type=module", "-e", example]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(matmulResult);
  });

  it("refuses require() with a message that says to import it", () => {
    const r = node(["-e", 'require("@kiln/kernels-wasm")']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/@kiln\/kernels-wasm is an ES module and cannot be loaded with require\(\)\. Use import/);
  });

  it("with setV8Flag: false sets no V8 flag and runs plain SIMD where the engine needs one for relaxed", () => {
    const script = `
      import { createKernels } from "@kiln/kernels-wasm";
      const k = await createKernels({ threads: 1, setV8Flag: false });
      console.log(JSON.stringify({ simd: k.info.simd }));
      await k.dispose();
    `;
    const r = node(["--input-type=module", "-e", script]);
    expect(r.code, r.stderr).toBe(0);
    // Node 20's V8 validates relaxed SIMD only behind --experimental-wasm-relaxed-simd.
    if (process.versions.node.startsWith("20.")) expect(JSON.parse(r.stdout)).toEqual({ simd: "plain" });
  });
});

const CONSUMER = `
import { createKernels, type KernelsOptions, type MatmulOptions } from "@kiln/kernels-wasm";

const options: KernelsOptions = { threads: 2, simd: "auto", setV8Flag: false };
const kernels = await createKernels(options);
const shape: MatmulOptions = { m: 2, n: 2, k: 2, transB: true };
const c: Float32Array = kernels.matmul(new Float32Array(4), new Float32Array(4), shape);
const threads: number = kernels.info.threads;
// @ts-expect-error m must be a number
kernels.matmul(new Float32Array(4), new Float32Array(4), { m: "2", n: 2, k: 2 });
// @ts-expect-error there is no option tranzB
kernels.matmul(new Float32Array(4), new Float32Array(4), { m: 2, n: 2, k: 2, tranzB: true });
// @ts-expect-error simd is "auto", "relaxed" or "plain"
await createKernels({ simd: "fast" });
console.log(c, threads);
`;

describe("the packed types, without @kiln/contract installed", () => {
  const tsc = path.join(repoRoot, "node_modules/typescript/bin/tsc");
  for (const resolution of [
    { module: "NodeNext", moduleResolution: "NodeNext" },
    { module: "ESNext", moduleResolution: "Bundler" },
  ]) {
    it(`type-check a strict consumer (${resolution.moduleResolution}) and reject misuse`, () => {
      const dir = path.join(app, `ts-${resolution.moduleResolution}`);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, "consumer.ts"), CONSUMER);
      const compilerOptions = { ...resolution, target: "ES2022", lib: ["ES2022", "DOM"], strict: true, noEmit: true, skipLibCheck: false, types: [] };
      fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["consumer.ts"] }));
      const r = spawnSync(process.execPath, [tsc, "-p", dir], { cwd: dir, encoding: "utf8" });
      expect(r.stdout + r.stderr).toBe("");
      expect(r.status).toBe(0);
    });
  }
});
