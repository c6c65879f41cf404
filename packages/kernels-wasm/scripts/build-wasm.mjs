#!/usr/bin/env node
// Builds the WebAssembly kernels from csrc/*.c into build/:
//   kernels-<simd>-<memory>.wasm
//     simd:   plain   (-msimd128)                 every engine with SIMD
//             relaxed (-msimd128 -mrelaxed-simd)  fused multiply-add; needs clang >= 16
//     memory: shared  (imports a shared memory; used by the thread pool)
//             single  (imports an ordinary memory; the fallback without SharedArrayBuffer)
// Each module is standalone: no JS glue, one imported memory `env.memory`,
// exports __stack_pointer and __heap_base for the loader.
//
// Toolchains, in order of preference:
//   1. clang-16 + wasm-ld (Debian: clang-16 lld-16), or $KILN_CLANG / $KILN_WASM_LD
//   2. emcc (Debian: emscripten node-acorn, or emsdk): plain SIMD only
//
// Flags: --if-stale  rebuild only when a source is newer than an output.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const srcDir = path.join(pkgDir, "csrc");
const outDir = path.join(pkgDir, "build");
const objDir = path.join(outDir, "obj");
const MAX_MEMORY = 4294967296; // wasm32: 65536 pages of 64 KiB
const STACK_SIZE = 65536;

const sources = fs.readdirSync(srcDir).filter((f) => f.endsWith(".c")).sort();
const headers = fs.readdirSync(srcDir).filter((f) => f.endsWith(".h"));
const variants = [
  { simd: "plain", memory: "shared" },
  { simd: "plain", memory: "single" },
  { simd: "relaxed", memory: "shared" },
  { simd: "relaxed", memory: "single" },
];
const outputName = (v) => `kernels-${v.simd}-${v.memory}.wasm`;

function works(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.status === 0 ? r.stdout + r.stderr : null;
}

function clangMajor(cmd) {
  const out = works(cmd, ["--version"]);
  const m = out && /clang version (\d+)/.exec(out);
  return m ? Number(m[1]) : 0;
}

function findClang() {
  const candidates = [process.env.KILN_CLANG, "clang-16", "clang-17", "clang-18", "clang-19", "clang"].filter(Boolean);
  const clang = candidates.find((c) => clangMajor(c) >= 16);
  if (!clang) return null;
  const ldCandidates = [
    process.env.KILN_WASM_LD,
    `/usr/lib/llvm-${clangMajor(clang)}/bin/wasm-ld`,
    `wasm-ld-${clangMajor(clang)}`,
    "wasm-ld",
  ].filter(Boolean);
  const ld = ldCandidates.find((c) => works(c, ["--version"]) !== null);
  return ld ? { clang, ld } : { clang, ld: null };
}

function findEmcc() {
  const env = { ...process.env, NODE_PATH: process.env.NODE_PATH ?? "/usr/share/nodejs" };
  const r = spawnSync("emcc", ["--version"], { encoding: "utf8", env });
  return r.status === 0 ? { emcc: "emcc", env } : null;
}

function isStale() {
  const inputs = [...sources, ...headers].map((f) => path.join(srcDir, f));
  inputs.push(fileURLToPath(import.meta.url));
  const newestInput = Math.max(...inputs.map((f) => fs.statSync(f).mtimeMs));
  return variants.some((v) => {
    const out = path.join(outDir, outputName(v));
    return !fs.existsSync(out) || fs.statSync(out).mtimeMs < newestInput;
  });
}

function run(cmd, args, env) {
  try {
    execFileSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"], env: env ?? process.env });
  } catch {
    console.error(`build-wasm: command failed:\n  ${cmd} ${args.join(" ")}`);
    process.exit(1);
  }
}

function buildWithClang({ clang, ld }, v) {
  const features = ["-msimd128", "-mbulk-memory", "-mmutable-globals", "-mnontrapping-fptoint", "-msign-ext"];
  if (v.simd === "relaxed") features.push("-mrelaxed-simd", "-DKILN_RELAXED_SIMD=1");
  if (v.memory === "shared") features.push("-matomics");
  const objects = sources.map((src) => {
    const obj = path.join(objDir, `${path.basename(src, ".c")}-${v.simd}-${v.memory}.o`);
    run(clang, [
      "--target=wasm32", "-O3", "-std=c11", "-ffreestanding", "-nostdlib", "-Wall", "-Wextra", "-Werror",
      // Keep constant offsets in load/store immediates (V8 folds those into the address).
      "-mllvm", "-disable-lsr",
      ...features, "-c", path.join(srcDir, src), "-o", obj,
    ]);
    return obj;
  });
  const linkFlags = [
    "--no-entry", "--import-memory", `--max-memory=${MAX_MEMORY}`, "-z", `stack-size=${STACK_SIZE}`,
    "--export=__stack_pointer", "--export=__heap_base", "--strip-debug",
  ];
  if (v.memory === "shared") linkFlags.push("--shared-memory");
  run(ld, [...linkFlags, ...objects, "-o", path.join(outDir, outputName(v))]);
}

function buildWithEmcc({ emcc, env }, v) {
  const flags = [
    "-O3", "-msimd128", "-mbulk-memory", "-mmutable-globals", "-mllvm", "-disable-lsr", "--no-entry", "-sSTANDALONE_WASM", "-sIMPORTED_MEMORY",
    "-sALLOW_MEMORY_GROWTH", `-sMAXIMUM_MEMORY=${MAX_MEMORY}`, `-sTOTAL_STACK=${STACK_SIZE}`,
    "-Wl,--export=__stack_pointer", "-Wl,--export=__heap_base",
  ];
  if (v.memory === "shared") flags.push("-matomics", "-Wl,--shared-memory");
  run(emcc, [...flags, ...sources.map((s) => path.join(srcDir, s)), "-o", path.join(outDir, outputName(v))], env);
}

function main() {
  if (process.argv.includes("--if-stale") && !isStale()) return;
  fs.mkdirSync(objDir, { recursive: true });

  const llvm = process.env.KILN_WASM_TOOLCHAIN === "emcc" ? null : findClang();
  if (llvm && llvm.ld) {
    for (const v of variants) buildWithClang(llvm, v);
    console.log(`build-wasm: built ${variants.length} modules with ${llvm.clang} + ${llvm.ld} into ${path.relative(pkgDir, outDir)}/`);
    return;
  }
  const emcc = findEmcc();
  if (emcc) {
    const plain = variants.filter((v) => v.simd === "plain");
    for (const v of variants) fs.rmSync(path.join(outDir, outputName(v)), { force: true });
    for (const v of plain) buildWithEmcc(emcc, v);
    console.warn(
      "build-wasm: built the plain-SIMD modules with emcc; the relaxed-SIMD build needs clang >= 16 " +
        "and its wasm-ld (Debian: apt-get install clang-16 lld-16).",
    );
    return;
  }
  const missing = llvm && !llvm.ld
    ? `found ${llvm.clang} but no wasm-ld for it: install the Debian package lld-16 (apt-get install lld-16)`
    : "no C-to-WebAssembly compiler found: install the Debian packages clang-16 and lld-16 " +
      "(apt-get install clang-16 lld-16), or emscripten and node-acorn (apt-get install emscripten node-acorn), " +
      "or set KILN_CLANG and KILN_WASM_LD to a clang >= 16 and its wasm-ld";
  console.error(`build-wasm: ${missing}.`);
  process.exit(1);
}

main();
