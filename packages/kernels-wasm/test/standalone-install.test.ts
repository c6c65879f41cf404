import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-standalone-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

// The package as published (pnpm pack), unpacked alone into node_modules: no
// @kiln/contract, no other @kiln package. Importing it and multiplying must work.
it("runs from its published files with no other @kiln package installed", () => {
  execFileSync("pnpm", ["pack", "--pack-destination", work], { cwd: pkgDir, stdio: "pipe" });
  const tarball = fs.readdirSync(work).find((f) => f.endsWith(".tgz"))!;
  const modules = path.join(work, "app", "node_modules", "@kiln");
  fs.mkdirSync(modules, { recursive: true });
  execFileSync("tar", ["xzf", path.join(work, tarball), "-C", modules]);
  fs.renameSync(path.join(modules, "package"), path.join(modules, "kernels-wasm"));
  expect(fs.readdirSync(modules)).toEqual(["kernels-wasm"]);

  const script = `
    import { createKernels } from "@kiln/kernels-wasm";
    const k = await createKernels({ threads: 2 });
    const c = k.matmul(new Float32Array([1, 2, 3, 4]), new Float32Array([5, 6, 7, 8]), { m: 2, n: 2, k: 2 });
    console.log(JSON.stringify({ c: Array.from(c), simd: k.info.simd, threads: k.info.threads }));
    k.dispose();
    process.exit(0);
  `;
  fs.writeFileSync(path.join(work, "app", "check.mjs"), script);
  const out = execFileSync(process.execPath, ["check.mjs"], { cwd: path.join(work, "app"), encoding: "utf8" });
  const result = JSON.parse(out.trim().split("\n").at(-1)!);
  expect(result.c).toEqual([19, 22, 43, 50]);
  expect(result.threads).toBeGreaterThanOrEqual(1);
}, 120_000);
