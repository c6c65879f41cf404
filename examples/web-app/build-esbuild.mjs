// Bundles the page with esbuild into out/. esbuild leaves new URL(..., import.meta.url)
// as it is, so both entries are bundled and the package's assets are copied beside them.
import fs from "node:fs";
import { build } from "esbuild";

await build({ entryPoints: ["main.js", "kernels-worker.js"], bundle: true, format: "esm", outdir: "out" });
fs.copyFileSync("index.html", "out/index.html");
fs.cpSync("node_modules/@kiln/kernels-wasm/dist/assets", "out/assets", { recursive: true });
