import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installTarballs, linkWorkspacePackage, packPackage } from "@kiln/tooling/packed-install";
import { chromiumMissingReason, launchChromium, type HeadlessChromium } from "./browser/chromium.js";
import { folderRoutes } from "./browser/folder-routes.js";
import { type PageVisit, visitExamplePage } from "./browser/page-visit.js";
import { startStaticServer } from "./browser/static-server.js";

// examples/web-app built from the packed tarball in a fresh folder, by Vite, esbuild,
// webpack and Rollup (the workspace's copies, linked in), with no configuration beyond
// the example's own; served with and without COOP/COEP and run in headless Chromium:
// 2 threads / 1 thread, the right product, nothing 404s, no data: worker, each
// .wasm fetched once. Also the Vite dev server, and the missing-asset errors of the
// esbuild and Rollup builds naming the step that was left out.
const missing = chromiumMissingReason();
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repoRoot = path.resolve(pkgDir, "../..");
const exampleDir = path.join(repoRoot, "examples/web-app");
const C = [4, 5, 10, 11];

let app: string;
let browser: HeadlessChromium | undefined;
const BUNDLERS = ["vite", "esbuild", "webpack", "rollup"] as const;
const builds: Record<(typeof BUNDLERS)[number] | "rollupWithoutAssets", { dir: string; log: string }> = {} as never;

function run(args: string[]): string {
  const r = spawnSync(process.execPath, args, { cwd: app, encoding: "utf8", timeout: 120_000 });
  const log = `${r.stdout}${r.stderr}`;
  if (r.status !== 0) throw new Error(`node ${args.join(" ")} failed:\n${log}`);
  return log;
}

beforeAll(async () => {
  if (missing) return;
  const packed = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-kernels-wasm-pack-"));
  app = installTarballs("kiln-kernels-wasm-web-", [packPackage(pkgDir, packed)]);
  fs.rmSync(packed, { recursive: true, force: true });
  for (const f of fs.readdirSync(exampleDir).filter((f) => f !== "package.json" && f !== "README.md")) fs.copyFileSync(path.join(exampleDir, f), path.join(app, f));
  linkWorkspacePackage(app, "vite", path.join(repoRoot, "node_modules/vitest/package.json"));
  for (const name of ["esbuild", "webpack", "rollup", "@rollup/plugin-node-resolve", "@web/rollup-plugin-import-meta-assets"]) {
    linkWorkspacePackage(app, name, path.join(pkgDir, "package.json"));
  }
  builds.vite = { dir: path.join(app, "dist"), log: run(["node_modules/vite/bin/vite.js", "build"]) };
  builds.esbuild = { dir: path.join(app, "out"), log: run(["build-esbuild.mjs"]) };
  builds.webpack = { dir: path.join(app, "out-webpack"), log: withoutWebpackSizeHints(run(["build-webpack.mjs"])) };
  builds.rollup = { dir: path.join(app, "out-rollup"), log: run(["build-rollup.mjs"]) };
  builds.rollupWithoutAssets = { dir: path.join(app, "out-rollup-no-assets"), log: run(["build-rollup.mjs", "--no-assets"]) };
  browser = await launchChromium();
}, 180_000);

/**
 * webpack's build report less its size hints (the four .wasm files are over its
 * 244 KiB recommendation; a page fetches only one): any other warning stays.
 */
function withoutWebpackSizeHints(log: string): string {
  const blocks = log.split(/^(?=WARNING in |ERROR in )/m);
  return blocks.filter((b) => !/^WARNING in (asset size limit|entrypoint size limit|webpack performance recommendations)/.test(b)).join("");
}

afterAll(async () => {
  await browser?.close();
  if (app) fs.rmSync(app, { recursive: true, force: true });
});

function expectCleanVisit(v: PageVisit, threads: number): void {
  expect(v.error).toBeUndefined();
  expect(v.result?.c).toEqual(C);
  expect(v.result?.threads).toBe(threads);
  if (threads === 1) expect(v.result?.threadLimitReason).toMatch(/SharedArrayBuffer is unavailable/);
  expect(v.failedRequests).toEqual([]);
  expect(v.workerUrls.length).toBe(threads === 2 ? 2 : 1);
  expect(v.workerUrls.filter((u) => !u.startsWith("http://"))).toEqual([]);
  expect(Object.keys(v.wasmRequests).length).toBe(1);
  expect(Object.values(v.wasmRequests)).toEqual([1]);
}

describe.each(BUNDLERS)("examples/web-app bundled by %s from the packed tarball", (bundler) => {
  it("builds without a warning about Node modules", (ctx) => {
    if (missing) return ctx.skip(missing);
    expect(builds[bundler].log).not.toMatch(/externalized|node:|warning/i);
    // The esbuild, webpack and Rollup builds print only warnings and errors (Rollup's say "could not be resolved").
    if (bundler !== "vite") expect(builds[bundler].log.trim()).toBe("");
    const code = fs.readdirSync(builds[bundler].dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".js"));
    for (const f of code) expect(fs.readFileSync(path.join(builds[bundler].dir, f), "utf8"), f).not.toMatch(/["']node:|data:text\/javascript/);
  });

  for (const isolated of [true, false]) {
    const threads = isolated ? 2 : 1;
    it(`multiplies on ${threads} thread${threads > 1 ? "s" : ""} ${isolated ? "with" : "without"} COOP/COEP`, async (ctx) => {
      if (missing) return ctx.skip(missing);
      const server = await startStaticServer(folderRoutes(builds[bundler].dir), { isolated });
      try {
        expectCleanVisit(await visitExamplePage(browser!.context, `${server.origin}/`), threads);
      } finally {
        await server.close();
      }
    });
  }
});

describe("a bundle without the package's assets beside it", () => {
  /** Serves `dir`, less its .wasm files when `dropWasm`, and returns what the page reports. */
  async function visitWithoutAssets(dir: string, dropWasm: boolean): Promise<PageVisit> {
    const routes = folderRoutes(dir);
    const server = await startStaticServer((p) => (dropWasm && p.endsWith(".wasm") ? Promise.resolve(undefined) : routes(p)), { isolated: true });
    try {
      return await visitExamplePage(browser!.context, `${server.origin}/`);
    } finally {
      await server.close();
    }
  }
  const notFound = /DeviceError: the WebAssembly kernels \(kernels-plain-shared\.wasm\) were not found at http:\/\/127\.0\.0\.1:\d+\/assets\/kernels-plain-shared\.wasm/;

  it("esbuild, assets not copied: creation fails naming the missing module's URL and the copy step", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const v = await visitWithoutAssets(builds.esbuild.dir, true);
    expect(v.result).toBeUndefined();
    expect(v.error).toMatch(notFound);
    expect(v.error).toMatch(/esbuild: copy node_modules\/@kiln\/kernels-wasm\/dist\/assets\//);
  });

  it("Rollup without importMetaAssets: creation fails naming the plugin line to add", async (ctx) => {
    if (missing) return ctx.skip(missing);
    expect(fs.existsSync(path.join(builds.rollupWithoutAssets.dir, "assets"))).toBe(false);
    const v = await visitWithoutAssets(builds.rollupWithoutAssets.dir, false);
    expect(v.result).toBeUndefined();
    expect(v.error).toMatch(notFound);
    expect(v.error).toContain('Rollup: add importMetaAssets({ include: "**/@kiln/kernels-wasm/**" }) from @web/rollup-plugin-import-meta-assets');
  });
});

/** Starts `vite` (the dev server) in the app folder and resolves with its URL. */
async function startViteDevServer(): Promise<{ url: string; process: ChildProcess }> {
  const child = spawn(process.execPath, ["node_modules/vite/bin/vite.js", "--host", "127.0.0.1", "--port", "0", "--clearScreen", "false"], { cwd: app });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`vite did not start:\n${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /Local:\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out.replace(/\x1b\[[0-9;]*m/g, ""));
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`vite exited with ${code}:\n${out}`)));
  });
  return { url, process: child };
}

describe("examples/web-app on the Vite dev server", () => {
  it("multiplies on 2 threads (the example's config sends COOP/COEP)", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const server = await startViteDevServer();
    try {
      expectCleanVisit(await visitExamplePage(browser!.context, server.url), 2);
    } finally {
      server.process.kill();
    }
  }, 60_000);
});
