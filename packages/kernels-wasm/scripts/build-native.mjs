#!/usr/bin/env node
// Builds the native kernels (native/src, CMakeLists.txt) with cmake-js into
// build-native/Release/kiln_native.node, and records the outcome in
// build-native/build-info.json, which src/native-addon-node.ts reports at run time.
//
// Without cmake or a C++ compiler the addon is skipped with a one-line message and the
// package works as before (the WebAssembly kernels run everything); a compile error fails
// the build. $CXX chooses the compiler; KILN_NATIVE_BUILD_DIR builds elsewhere (the package
// then loads the addon from there too: src/native-addon-node.ts).
//
// Flags: --if-stale    build only when a source is newer than the addon (or nothing was tried).
//        --cross arm64  cross-compile for 64-bit Arm Linux (the NEON kernels) with Debian's
//                       aarch64-linux-gnu-g++ and native/toolchain-aarch64-linux-gnu.cmake,
//                       into build-native/arm64/ (never loaded here: it checks the arm64 build
//                       compiles; test/native-arm64-build.test.ts). Without that compiler it
//                       is skipped like a missing host compiler.
//        --out DIR      build into DIR (relative to the package) instead (a cross build
//                       never takes KILN_NATIVE_BUILD_DIR: the package loads from there).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The value after `flag` on the command line, or undefined. */
function flagValue(flag) {
  const i = process.argv.indexOf(flag);
  if (i < 0) return undefined;
  const value = process.argv[i + 1];
  if (!value || value.startsWith("--")) fail(`${flag} needs a value`);
  return value;
}

function fail(message) {
  console.error(`build-native: ${message}`);
  process.exit(1);
}

/** Cross builds: the compiler and cmake toolchain file of each target architecture. */
const CROSS_TARGETS = {
  arm64: { cxx: "aarch64-linux-gnu-g++", toolchain: path.join(pkgDir, "native", "toolchain-aarch64-linux-gnu.cmake"), install: "apt-get install g++-aarch64-linux-gnu" },
};
const crossName = flagValue("--cross");
const cross = crossName === undefined ? undefined : CROSS_TARGETS[crossName];
if (crossName !== undefined && !cross) fail(`--cross ${crossName}: the cross builds are ${Object.keys(CROSS_TARGETS).join(", ")}`);
const outDir = path.resolve(pkgDir, flagValue("--out") || (cross ? path.join("build-native", crossName) : process.env.KILN_NATIVE_BUILD_DIR || "build-native"));
const addonFile = path.join(outDir, "Release", "kiln_native.node");
const infoFile = path.join(outDir, "build-info.json");
const cmakeJs = path.join(pkgDir, "node_modules", "cmake-js", "bin", "cmake-js");

function runs(cmd, args = ["--version"]) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.status === 0 ? (r.stdout || r.stderr).split("\n")[0].trim() : null;
}

function writeInfo(info) {
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(infoFile, JSON.stringify(info, null, 2) + "\n");
}

function sources() {
  const dir = path.join(pkgDir, "native", "src");
  return [...fs.readdirSync(dir).map((f) => path.join(dir, f)), path.join(pkgDir, "CMakeLists.txt"), fileURLToPath(import.meta.url), ...(cross ? [cross.toolchain] : [])];
}

function isStale() {
  if (!fs.existsSync(infoFile)) return true;
  const info = JSON.parse(fs.readFileSync(infoFile, "utf8"));
  const newest = Math.max(...sources().map((f) => fs.statSync(f).mtimeMs));
  if (!info.built) return fs.statSync(infoFile).mtimeMs < newest;
  return !fs.existsSync(addonFile) || fs.statSync(addonFile).mtimeMs < newest;
}

/** The C++ compiler cmake should use: the cross target's, else $CXX when set, else the first of c++, g++, clang++ that runs. */
function findCompiler() {
  if (cross) return runs(cross.cxx) ? { cxx: cross.cxx } : { missing: `no ${cross.cxx} was found (${cross.install})` };
  if (process.env.CXX) return runs(process.env.CXX) ? { cxx: process.env.CXX } : { missing: `CXX=${process.env.CXX} does not run` };
  const cxx = ["c++", "g++", "clang++"].find((c) => runs(c));
  return cxx ? { cxx } : { missing: "no C++ compiler was found (c++, g++ or clang++; or set CXX)" };
}

function skip(missing) {
  writeInfo({ built: false, missingToolchain: true, reason: `addon not built: ${missing}` });
  console.log(`build-native: ${missing}; ${cross ? `the ${crossName} addon is not built.` : "the native kernels are not built (the WebAssembly kernels run everything)."}`);
}

function cmake(command, extra, defines) {
  const args = [cmakeJs, command, "--out", outDir, ...extra, ...Object.entries(defines).map(([k, v]) => `--CD${k}=${v}`)];
  const r = spawnSync(process.execPath, args, { cwd: pkgDir, encoding: "utf8", maxBuffer: 64 * 2 ** 20 });
  return { ok: r.status === 0, log: `${r.stdout ?? ""}\n${r.stderr ?? ""}` };
}

function main() {
  if (process.argv.includes("--if-stale") && !isStale()) return;
  const compiler = findCompiler();
  if (compiler.missing) return skip(compiler.missing);
  if (!runs("cmake")) return skip("no cmake was found");
  const defines = { CMAKE_CXX_COMPILER: compiler.cxx, CMAKE_BUILD_TYPE: "Release", ...(cross ? { CMAKE_TOOLCHAIN_FILE: cross.toolchain } : {}) };
  // The linker rewrites its output in place: move the last addon aside first, so that a
  // process that has it loaded (a test run) keeps its copy and the new one is a new file.
  const previous = `${addonFile}.previous`;
  if (fs.existsSync(addonFile)) fs.renameSync(addonFile, previous);
  const configured = cmake("configure", [], defines);
  const built = configured.ok ? cmake("build", ["--parallel", String(Math.max(1, Number(process.env.KILN_BUILD_JOBS) || 2))], defines) : configured;
  const log = configured === built ? configured.log : `${configured.log}\n${built.log}`;
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, "build.log"), log);
  fs.rmSync(previous, { force: true });
  if (!built.ok) {
    writeInfo({ built: false, reason: `addon not built: the build failed (${path.relative(pkgDir, path.join(outDir, "build.log"))})` });
    console.error(log.split("\n").filter((l) => /error/i.test(l)).slice(0, 40).join("\n"));
    console.error(`build-native: the native kernels failed to build; see ${path.join(outDir, "build.log")}`);
    process.exit(1);
  }
  writeInfo({ built: true, cxx: runs(compiler.cxx), ...(cross ? { cross: crossName } : {}) });
  console.log(`build-native: built ${path.relative(pkgDir, addonFile)}${cross ? ` for ${crossName}` : ""} with ${compiler.cxx}`);
}

main();
