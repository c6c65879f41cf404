#!/usr/bin/env node
// After tsc: replaces dist/bin/kiln.js with an ES module bundle of the CLI, the workspace
// packages it runs on (@kiln/core, @kiln/contract, @kiln/distributed) and their pure-JS
// dependencies, so that `kiln` starts by reading a few files instead of some 550. What
// the CLI imports lazily (plots, push) goes to chunks beside it (dist/bin/kiln-chunk-*.js),
// loaded when a command needs them, with the code they share with the entry.
// Left as imports, loaded from node_modules as before:
//   - the kernel packages, each one bundle already that finds its .wasm, worker or native
//     addon beside it (@kiln/kernels-wasm, @kiln/kernels-cuda), and @resvg/resvg-js (native);
//   - large ones that only some commands load: @huggingface/hub (push), gpt-tokenizer's
//     encodings and ranks (megabytes each), echarts (served as a file by the dashboard);
//   - @huggingface/tokenizers, one file of its own.
// The CLI is bundled from src/ (esbuild strips the types); the rest of dist/ stays as tsc
// wrote it: the package's library entry, and the files the dashboard serves. Where a
// bundled module reads import.meta.url, it is given the URL of its own built file (for a
// src/ module, tsc's output of it in dist/), so paths relative to it resolve as unbundled:
// @kiln/distributed finds its native addons in its own folder.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(pkgDir, "src");
const packagesDir = path.dirname(pkgDir);
const dist = path.join(pkgDir, "dist");
const bin = path.join(dist, "bin", "kiln.js");

const EXTERNAL = [
  "node:*",
  "@kiln/kernels-wasm",
  "@kiln/kernels-cuda",
  "@resvg/resvg-js",
  "@huggingface/hub",
  "@huggingface/tokenizers",
  "gpt-tokenizer",
  "gpt-tokenizer/*",
  "echarts",
];

/** A bundled module's own built file: tsc's output in dist/ for a module of a package's src/. */
function builtFile(file) {
  const m = /^(.*)[\\/]src[\\/](.*)\.ts$/.exec(file);
  return m ? path.join(m[1], "dist", `${m[2]}.js`) : file;
}

/** import.meta.url in a workspace module -> the URL of its own built file, not the bundle's. */
const ownFileUrls = {
  name: "own-file-urls",
  setup(b) {
    b.onLoad({ filter: /\.[jt]s$/ }, (args) => {
      if (!args.path.startsWith(packagesDir + path.sep) || args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const text = fs.readFileSync(args.path, "utf8");
      if (!text.includes("import.meta.url")) return undefined;
      const rel = path.relative(path.dirname(bin), builtFile(args.path)).split(path.sep).join("/");
      return { contents: text.replaceAll("import.meta.url", `new URL(${JSON.stringify(rel)}, import.meta.url).href`), loader: args.path.endsWith(".ts") ? "ts" : "js" };
    });
  },
};

const result = await build({
  entryPoints: [path.join(src, "bin", "kiln.ts")],
  bundle: true,
  write: false,
  format: "esm",
  platform: "node",
  target: "node20",
  outdir: path.dirname(bin),
  entryNames: "[name]",
  chunkNames: "kiln-chunk-[hash]",
  splitting: true,
  external: EXTERNAL,
  plugins: [ownFileUrls],
  logLevel: "warning",
  // CommonJS dependencies that require() Node's built-in modules need a require().
  banner: { js: 'import { createRequire as kilnCreateRequire } from "node:module";\nconst require = kilnCreateRequire(import.meta.url);' },
});
// The entry keeps its "#!/usr/bin/env node" line first. The chunks of an earlier build
// go first; the entry is written last, beside, then renamed: an interrupted build leaves
// tsc's dist/bin/kiln.js, which runs as well.
const binDir = path.dirname(bin);
for (const f of fs.readdirSync(binDir)) if (f.startsWith("kiln-chunk-")) fs.rmSync(path.join(binDir, f));
for (const out of result.outputFiles) if (out.path !== bin) fs.writeFileSync(out.path, out.contents);
const entry = result.outputFiles.find((out) => out.path === bin);
fs.writeFileSync(`${bin}.tmp`, entry.contents);
fs.renameSync(`${bin}.tmp`, bin);
fs.rmSync(`${bin}.map`, { force: true });
