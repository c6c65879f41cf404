#!/usr/bin/env node
// Lays out the published package in dist/ (after tsc has written dist/types/):
//   index.js      Node entry ("node" condition), @kiln/contract's runtime inlined
//   browser.js    browser entry ("browser"/"default"): no node: import; the backends throw saying why
//   require.cjs   the "require" condition: an error saying the package is ESM-only
//   types/        declarations, with @kiln/contract's copied into dist/types/contract/
// Each bundle is one ES module, so the package runs with no other @kiln package
// installed. The native addons are not in dist/: src/native-addon.ts finds them in
// build/ and build-sim/ beside it, or where KILN_CUDA_ADDON / KILN_CUDA_SIM_ADDON say.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { copyContractTypes } from "@kiln/tooling/standalone-types";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(pkgDir, "dist");

/** @param {string} entry @param {string} outfile @param {"node" | "browser"} platform */
function bundle(entry, outfile, platform) {
  return build({
    entryPoints: [path.join(pkgDir, "src", entry)],
    outfile: path.join(dist, outfile),
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["@kiln/source", platform, "import"],
    mainFields: ["module", "main"],
    external: platform === "node" ? ["node:*"] : [],
    logLevel: "warning",
    banner: { js: "// @kiln/kernels-cuda, with @kiln/contract's runtime inlined." },
  });
}

// tsc wrote dist/types/; anything else in dist/ is from an earlier layout or build.
for (const f of fs.readdirSync(dist)) if (f !== "types") fs.rmSync(path.join(dist, f), { recursive: true, force: true });
await Promise.all([bundle("index.ts", "index.js", "node"), bundle("browser.ts", "browser.js", "browser")]);
fs.copyFileSync(path.join(pkgDir, "src", "require.cjs"), path.join(dist, "require.cjs"));
copyContractTypes(path.join(dist, "types"), path.resolve(pkgDir, "../contract/dist"));
