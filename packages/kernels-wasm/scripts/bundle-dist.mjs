#!/usr/bin/env node
// Rewrites dist/index.js as one ES module with @kiln/contract's runtime code inlined,
// so the published package runs with no other @kiln package installed (the
// contract stays a type-only peer). tsc still emits the .d.ts files and
// dist/thread-worker.js, which the pool loads next to dist/index.js.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
await build({
  entryPoints: [path.join(pkgDir, "src/index.ts")],
  outfile: path.join(pkgDir, "dist/index.js"),
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["@kiln/source", "import"],
  mainFields: ["module", "main"],
  external: ["node:*"],
  sourcemap: true,
  logLevel: "warning",
  banner: { js: "// @kiln/kernels-wasm, with @kiln/contract's runtime inlined." },
});
