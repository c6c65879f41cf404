import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installTarballs, packPackage } from "@kiln/tooling/packed-install";

// The contract as a backend author installs it: the packed tarball alone in a
// fresh folder, no vitest. checkConformance, supportMatrix and the reference
// backend must load there, pass a correct backend and fail a broken one by name.
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const exampleDir = path.resolve(pkgDir, "../../examples/custom-backend");
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
