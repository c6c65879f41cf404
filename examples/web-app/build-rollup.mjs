// Bundles the page with Rollup into out-rollup/. Rollup leaves new URL(..., import.meta.url)
// as it is; importMetaAssets copies the kernels package's worker and .wasm files into
// out-rollup/assets/ and rewrites their URLs. It is limited to the package so that it
// leaves the page's own worker (kernels-worker.js, an input of its own) to Rollup.
// `node build-rollup.mjs --no-assets` leaves that line out (into out-rollup-no-assets/;
// the package's error then names it).
import fs from "node:fs";
import { nodeResolve } from "@rollup/plugin-node-resolve";
import { importMetaAssets } from "@web/rollup-plugin-import-meta-assets";
import { rollup } from "rollup";

const withAssets = !process.argv.includes("--no-assets");
const outDir = withAssets ? "out-rollup" : "out-rollup-no-assets";
const bundle = await rollup({
  input: ["main.js", "kernels-worker.js"],
  plugins: [nodeResolve({ browser: true }), ...(withAssets ? [importMetaAssets({ include: "**/@kiln/kernels-wasm/**" })] : [])],
});
await bundle.write({ dir: outDir, format: "es" });
await bundle.close();
fs.copyFileSync("index.html", `${outDir}/index.html`);
