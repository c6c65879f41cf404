#!/usr/bin/env node
// Lays out the published package in dist/ (after tsc has written dist/types/):
//   index.js              Node entry ("node" condition), @kiln/contract's runtime inlined
//   browser.js            browser entry ("browser"/"default"): no node: import anywhere
//   thread-worker-node.js the kernel worker Node starts
//   assets/               what a browser page loads beside its code: thread-worker.js and the four .wasm
//   require.cjs           the "require" condition: an error saying the package is ESM-only
//   types/                declarations, with @kiln/contract's copied into dist/types/contract/
// Each bundle is one ES module, so the package runs with no other @kiln package
// installed. Sources name the .wasm files in ../build/ (where build-wasm.mjs writes
// them) and the browser worker as src/thread-worker-browser.js; the bundles name their
// dist/ places instead, in the same new URL(..., import.meta.url) form.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { copyContractTypes } from "@kiln/tooling/standalone-types";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(pkgDir, "dist");
const src = (file) => path.join(pkgDir, "src", file);

/** Source text rewrites for the bundles: [file, from, to]. */
const DIST_PLACES = [
  ["wasm-module-loader.ts", /"\.\.\/build\//g, '"./assets/'],
  ["platform-browser.ts", /"\.\/thread-worker-browser\.js"/g, '"./assets/thread-worker.js"'],
];

const distPlaces = {
  name: "dist-places",
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/][a-z-]+\.ts$/ }, (args) => {
      const rewrites = DIST_PLACES.filter(([file]) => args.path === src(file));
      if (rewrites.length === 0) return undefined;
      let text = fs.readFileSync(args.path, "utf8");
      for (const [file, from, to] of rewrites) {
        if (!from.test(text)) throw new Error(`bundle-dist: ${file} no longer contains ${from}; update DIST_PLACES`);
        text = text.replace(from, to);
      }
      return { contents: text, loader: "ts" };
    });
  },
};

/** @param {string} entry @param {string} outfile @param {"node" | "browser"} platform */
function bundle(entry, outfile, platform) {
  return build({
    entryPoints: [src(entry)],
    outfile: path.join(dist, outfile),
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["@kiln/source", platform, "import"],
    mainFields: ["module", "main"],
    external: platform === "node" ? ["node:*"] : [],
    plugins: [distPlaces],
    logLevel: "warning",
    banner: { js: "// @kiln/kernels-wasm, with @kiln/contract's runtime inlined." },
  });
}

for (const f of fs.readdirSync(dist)) if (/\.(js|js\.map|d\.ts|d\.ts\.map)$/.test(f)) fs.rmSync(path.join(dist, f));
fs.rmSync(path.join(dist, "assets"), { recursive: true, force: true });
fs.mkdirSync(path.join(dist, "assets"), { recursive: true });
await Promise.all([
  bundle("index.ts", "index.js", "node"),
  bundle("index.ts", "browser.js", "browser"),
  bundle("thread-worker-node.js", "thread-worker-node.js", "node"),
  bundle("thread-worker-browser.js", "assets/thread-worker.js", "browser"),
]);
for (const f of fs.readdirSync(path.join(pkgDir, "build")).filter((f) => f.endsWith(".wasm"))) {
  fs.copyFileSync(path.join(pkgDir, "build", f), path.join(dist, "assets", f));
}
fs.copyFileSync(src("require.cjs"), path.join(dist, "require.cjs"));
copyContractTypes(path.join(dist, "types"), path.resolve(pkgDir, "../contract/dist"));
