import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installTarballs, packPackage } from "@kiln/tooling/packed-install";

// The contract as a backend author installs it: the packed tarball alone in a
// fresh folder, no vitest. checkConformance, supportMatrix and the reference
// backend must load there, pass a correct backend and fail a broken one by name,
// and its declarations must type-check a strict consumer and reject misuse.
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repoRoot = path.resolve(pkgDir, "../..");
const exampleDir = path.join(repoRoot, "examples/custom-backend");
let app: string;

beforeAll(() => {
  const packed = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-contract-pack-"));
  app = installTarballs("kiln-contract-app-", [packPackage(pkgDir, packed)]);
  fs.rmSync(packed, { recursive: true, force: true });
  for (const f of ["js-backend.mjs", "check.mjs"]) fs.copyFileSync(path.join(exampleDir, f), path.join(app, f));
}, 60_000);
afterAll(() => fs.rmSync(app, { recursive: true, force: true }));

function node(args: string[]): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, args, { cwd: app, encoding: "utf8" });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

describe("the packed contract, installed alone", () => {
  it("holds no vitest, and the reference backend passes its matmul cases through checkConformance", () => {
    expect(fs.readdirSync(path.join(app, "node_modules")).filter((d) => !d.startsWith("."))).toEqual(["@kiln"]);
    const script = `
      import { createReferenceBackend } from "@kiln/contract";
      import { checkConformance } from "@kiln/contract/conformance";
      const outcomes = await checkConformance(createReferenceBackend(), { dtypes: ["f32"], filter: (c) => c.kernel === "matmul" && c.shape !== "large" });
      console.log(JSON.stringify(outcomes.map((o) => o.status)));
    `;
    const r = node(["--input-type=module", "-e", script]);
    expect(r.code, r.out).toBe(0);
    const statuses = JSON.parse(r.out) as string[];
    expect(statuses.length).toBeGreaterThan(5);
    expect(new Set(statuses)).toEqual(new Set(["passed"]));
    expect(node(["--input-type=module", "-e", 'await import("vitest")']).out).toMatch(/Cannot find package 'vitest'/);
  });

  it("passes the example backend (examples/custom-backend) and skips the kernels it does not declare", () => {
    const r = node(["check.mjs"]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/\| add \| ✓ \|/);
    expect(r.out).toMatch(/^\d+ passed, 0 failed, \d+ skipped$/m);
  });

  it("fails a deliberately broken copy of it, naming the kernel, the case and the wrong elements", () => {
    const source = fs.readFileSync(path.join(app, "js-backend.mjs"), "utf8");
    const broken = source.replace("z[i] = x[i] + y[i]", "z[i] = x[i] - y[i]");
    expect(broken).not.toBe(source);
    fs.writeFileSync(path.join(app, "js-backend.mjs"), broken);
    const r = node(["check.mjs"]);
    expect(r.code, r.out).toBe(1);
    expect(r.out).toMatch(/^FAILED add f32 prime n=\d+\n {2}out: \d+ of \d+ elements off/m);
    expect(r.out).not.toMatch(/FAILED scale/);
    expect(r.out).toMatch(/^\d+ passed, [1-9]\d* failed, \d+ skipped$/m);
  });
});

describe("the README's backend", () => {
  it("is examples/custom-backend/js-backend.mjs, word for word", () => {
    const readme = fs.readFileSync(path.join(pkgDir, "README.md"), "utf8");
    const example = fs.readFileSync(path.join(exampleDir, "js-backend.mjs"), "utf8");
    expect(readme).toContain(`\`\`\`js\n${example}\`\`\``);
  });
});

const CONSUMER = `
import {
  CONTRACT_VERSION,
  Kernel,
  KernelArgumentError,
  createReferenceBackend,
  isFloatDType,
  type Backend,
  type BufferHandle,
  type Capabilities,
  type FloatDType,
  type KernelArgsMap,
  type KernelName,
  type MatmulArgs,
  type ReferenceBackendOptions,
} from "@kiln/contract";
import { checkConformance, supportMatrix, type CaseOutcome, type ConformanceCase, type ConformanceOptions } from "@kiln/contract/conformance";

const options: ReferenceBackendOptions = { memoryBytes: 2 ** 20 };
const reference: Backend = createReferenceBackend(options);
const mine: Backend = { ...reference, name: "mine", contractVersion: CONTRACT_VERSION };
const a: BufferHandle = mine.alloc(24), b = mine.alloc(24), c = mine.alloc(16);
const args: MatmulArgs = { a, b, c, m: 2, n: 2, k: 3, transB: false, alpha: 1, dtype: "f32" };
mine.kernels[Kernel.matmul](args);
mine.kernels.fill({ out: c, n: 4, value: 0, dtype: "i32" });
function run<K extends KernelName>(backend: Backend, name: K, kernelArgs: KernelArgsMap[K]): void {
  backend.kernels[name](kernelArgs);
}
run(mine, "scale", { x: c, out: c, n: 4, alpha: 2, dtype: "f32" });
const dtypes: readonly FloatDType[] = mine.capabilities().kernelDTypes.matmul.filter(isFloatDType);
const device: Capabilities["device"] = mine.capabilities().device;
const only: ConformanceOptions = { dtypes, filter: (cc: ConformanceCase) => cc.kernel === "matmul" && cc.shape !== "large" };
const outcomes: CaseOutcome[] = await checkConformance(mine, only);
const failed: string[] = outcomes.filter((o) => o.status === "failed").flatMap((o) => [o.name, ...o.details]);
const table: string = supportMatrix(mine);
try {
  mine.kernels.matmul({ ...args, m: 0 });
} catch (e) {
  if (e instanceof KernelArgumentError) console.log(e.message);
}
console.log(device.name, failed, table);
`;

// Each line marked "// rejected: <text>" must draw a tsc error whose message holds <text>; no other line may.
const MISUSE = `
import { createReferenceBackend, type Backend, type MatmulArgs } from "@kiln/contract";
import { checkConformance } from "@kiln/contract/conformance";

const backend = createReferenceBackend();
const a = backend.alloc(24), b = backend.alloc(24), c = backend.alloc(16);
const shape: MatmulArgs = { a, b, c, m: "2", n: 2, k: 3, dtype: "f32" }; // rejected: Type 'string' is not assignable to type 'number'.
backend.kernels.matmul({ a, b, c, m: 2, n: 2, k: 3, tranzB: true, dtype: "f32" }); // rejected: 'tranzB' does not exist in type 'MatmulArgs'
backend.kernels.matmul({ a, b, c, m: 2, n: 2, k: 3, dtype: "f64" }); // rejected: Type '"f64"' is not assignable to type 'FloatDType'.
backend.kernels.fill({ out: c, n: 4, value: 0, dtype: "float32" }); // rejected: Type '"float32"' is not assignable to type 'DType'.
backend.kernels.matmull({ a, b, c, m: 2, n: 2, k: 3, dtype: "f32" }); // rejected: Property 'matmull' does not exist on type 'Kernels'.
backend.kernels.layerNormForward({ x: a, weight: b, out: c, mean: c, rows: 2, dim: 3, eps: 1e-5, dtype: "f32" }); // rejected: Property 'rstd' is missing
const future: Backend = { ...backend, contractVersion: 2 }; // rejected: Type '2' is not assignable to type '1'.
createReferenceBackend({ memoryBytes: "8 GiB" }); // rejected: Type 'string' is not assignable to type 'number'.
const outcomes = await checkConformance(backend, { dtypes: ["i32"] }); // rejected: Type '"i32"' is not assignable to type 'FloatDType'.
const passed = outcomes.filter((o) => o.status === "passd"); // rejected: have no overlap
const details: string = outcomes[0].details; // rejected: Type 'string[]' is not assignable to type 'string'.
console.log(shape, future, passed, details);
`;

interface TscError {
  line: number;
  text: string;
}

/** Runs the workspace's tsc on `file` in `dir` under strict options and `resolution`; returns the errors it reports. */
function typeCheck(dir: string, file: string, source: string, resolution: Record<string, string>): { code: number | null; errors: TscError[]; out: string } {
  const tsc = path.join(repoRoot, "node_modules/typescript/bin/tsc");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, file), source);
  const compilerOptions = { ...resolution, target: "ES2022", lib: ["ES2022", "DOM"], strict: true, noEmit: true, skipLibCheck: false, types: [], pretty: false };
  const config = `tsconfig.${path.basename(file, ".ts")}.json`;
  fs.writeFileSync(path.join(dir, config), JSON.stringify({ compilerOptions, files: [file] }));
  const r = spawnSync(process.execPath, [tsc, "-p", config], { cwd: dir, encoding: "utf8" });
  const out = r.stdout + r.stderr;
  const errors: TscError[] = [];
  for (const line of out.split("\n")) {
    const m = /^(.+?)\((\d+),\d+\): error (TS\d+: .*)$/.exec(line);
    if (m) {
      expect(m[1], out).toBe(file);
      errors.push({ line: Number(m[2]), text: m[3] });
    } else if (line.trim() && errors.length > 0) {
      errors[errors.length - 1].text += `\n${line.trim()}`;
    }
  }
  return { code: r.status, errors, out };
}

describe("the packed types under strict TypeScript, no skipLibCheck", () => {
  for (const resolution of [
    { module: "NodeNext", moduleResolution: "NodeNext" },
    { module: "ESNext", moduleResolution: "Bundler" },
  ]) {
    it(`type-check a consumer of the types, checkConformance and the reference backend (${resolution.moduleResolution})`, () => {
      const r = typeCheck(path.join(app, `ts-${resolution.moduleResolution}`), "consumer.ts", CONSUMER, resolution);
      expect(r.out).toBe("");
      expect(r.code).toBe(0);
    });

    it(`reject each misuse on its own line, and nothing else (${resolution.moduleResolution})`, () => {
      const r = typeCheck(path.join(app, `ts-${resolution.moduleResolution}`), "misuse.ts", MISUSE, resolution);
      expect(r.code, r.out).not.toBe(0);
      const marked = MISUSE.split("\n").flatMap((text, i) => {
        const m = /\/\/ rejected: (.+)$/.exec(text);
        return m ? [{ line: i + 1, expected: m[1] }] : [];
      });
      expect(marked.length).toBe(11);
      expect([...new Set(r.errors.map((e) => e.line))], r.out).toEqual(marked.map((m) => m.line));
      for (const { line, expected } of marked) {
        expect(r.errors.filter((e) => e.line === line).map((e) => e.text).join("\n"), `line ${line}: ${MISUSE.split("\n")[line - 1]}`).toContain(expected);
      }
    });
  }
});
