// Bundles the page with webpack 5 into out-webpack/, with no configuration for the
// kernels: webpack follows new Worker(new URL(...)) and new URL(..., import.meta.url),
// bundles the workers and emits the .wasm files beside the bundle.
import fs from "node:fs";
import path from "node:path";
import webpack from "webpack";

const outDir = path.resolve("out-webpack");
const compiler = webpack({ mode: "production", entry: "./main.js", output: { path: outDir, clean: true } });
const stats = await new Promise((resolve, reject) => compiler.run((error, result) => (error ? reject(error) : resolve(result))));
await new Promise((resolve) => compiler.close(resolve));
const report = stats.toString({ all: false, errors: true, warnings: true, colors: false }).trim();
if (report) console.error(report);
if (stats.hasErrors()) process.exit(1);
fs.copyFileSync("index.html", path.join(outDir, "index.html"));
