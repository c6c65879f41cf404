#!/usr/bin/env node
// Builds the native addons of @kiln/kernels-cuda with cmake-js:
//   cuda  build/Release/kiln_cuda.node          nvcc (CUDACXX, /usr/local/cuda/bin/nvcc or PATH)
//   sim   build-sim/Release/kiln_cuda_sim.node  clang++ with the CUDA headers (the simulator)
//   asan  build-sim-asan/Release/kiln_cuda_sim.node  the simulator under AddressSanitizer
// Usage: build-addon.mjs [cuda] [sim] [asan]   (default: cuda sim)
// A build that cannot run here is skipped with the reason written to <dir>/build-info.json,
// which the package reports at run time; nothing fails the install.
// KILN_KERNEL_FILES="a.cu;b.cu" limits the simulator to some kernel families.
// The cuda build keeps ptxas's resource report in build/ptxas-report.json.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cmakeJs = path.join(root, "node_modules", "cmake-js", "bin", "cmake-js");
const which = (cmd) => {
  const r = spawnSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : null;
};
const firstExisting = (...files) => files.find((f) => f && fs.existsSync(f)) ?? null;

function findNvcc() {
  return firstExisting(process.env.CUDACXX, "/usr/local/cuda/bin/nvcc", which("nvcc"));
}

function findCudaInclude() {
  const nvcc = findNvcc();
  const candidates = [process.env.KILN_CUDA_INCLUDE, nvcc && path.join(path.dirname(fs.realpathSync(nvcc)), "..", "include"), "/usr/local/cuda/include", "/usr/include"];
  return candidates.find((d) => d && fs.existsSync(path.join(d, "cuda_fp16.h")) && fs.existsSync(path.join(d, "cuda_bf16.h"))) ?? null;
}

function findSimCompiler() {
  return process.env.KILN_SIM_CXX || which("clang++-16") || which("clang++");
}

/**
 * x86-64 hosts: the simulator is built for this CPU (-march=native: FMA, AVX2 or AVX-512),
 * as it runs where it is built; an fmaf is then one instruction.
 */
function buildForHostCpu() {
  return process.arch === "x64";
}

function writeInfo(dir, info) {
  fs.mkdirSync(path.resolve(root, dir), { recursive: true });
  fs.writeFileSync(path.resolve(root, dir, "build-info.json"), JSON.stringify(info, null, 2) + "\n");
}

// Configure every time (quick when the folder is configured already), so that a define
// that changed since, such as KILN_KERNEL_FILES, reaches the cache; then build what changed.
function cmake(dir, defines) {
  const run = (command, extra) => {
    const args = [cmakeJs, command, "--out", dir, ...extra];
    for (const [k, v] of Object.entries(defines)) args.push(`--CD${k}=${v}`);
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", maxBuffer: 256 * 2 ** 20 });
    return { ok: r.status === 0, log: `${r.stdout ?? ""}\n${r.stderr ?? ""}` };
  };
  const configured = run("configure", []);
  if (!configured.ok) return configured;
  const built = run("build", ["--parallel", String(Math.max(1, Number(process.env.KILN_BUILD_JOBS) || 2))]);
  return { ok: built.ok, log: `${configured.log}\n${built.log}` };
}

/**
 * ptxas -v lines -> one record per kernel and arch, with the .cu file it was compiled
 * from (the build tool prints each compile's output under its "Building CUDA object" line).
 */
function ptxasReport(log) {
  const out = [];
  let current = null;
  let source = null;
  for (const line of log.split("\n")) {
    let m = /Building CUDA object \S*?\/csrc\/(\S+\.cu)\.o/.exec(line);
    if (m) {
      source = m[1];
      continue;
    }
    m = /Compiling entry function '(\S+)' for '(sm_\d+a?)'/.exec(line);
    if (m) {
      current = { kernel: m[1], arch: m[2], source, registers: 0, sharedBytes: 0, stackBytes: 0, spillStoreBytes: 0, spillLoadBytes: 0 };
      out.push(current);
      continue;
    }
    if (!current) continue;
    m = /(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/.exec(line);
    if (m) [current.stackBytes, current.spillStoreBytes, current.spillLoadBytes] = m.slice(1).map(Number);
    m = /Used (\d+) registers/.exec(line);
    if (m) current.registers = Number(m[1]);
    m = /(\d+) bytes smem/.exec(line);
    if (m) current.sharedBytes = Number(m[1]);
  }
  return out;
}

function buildCuda() {
  const nvcc = findNvcc();
  if (!nvcc) {
    writeInfo("build", { built: false, reason: "the CUDA kernels were not built: nvcc was not found (set CUDACXX or install the CUDA toolkit at /usr/local/cuda), then run 'pnpm --filter @kiln/kernels-cuda build'" });
    console.log("kernels-cuda: nvcc not found; the CUDA addon is not built (the package still loads and says so)");
    return true;
  }
  console.log(`kernels-cuda: building the CUDA addon with ${nvcc}`);
  const r = cmake("build", { CMAKE_CUDA_COMPILER: nvcc, CMAKE_BUILD_TYPE: "Release" });
  fs.writeFileSync(path.join(root, "build", "build.log"), r.log);
  if (!r.ok) {
    writeInfo("build", { built: false, reason: "the CUDA kernels failed to build; see packages/kernels-cuda/build/build.log" });
    console.error(r.log.split("\n").filter((l) => /error/i.test(l)).slice(0, 40).join("\n"));
    return false;
  }
  // An incremental build reports only the files it recompiled: merge into the last report.
  const reportFile = path.join(root, "build", "ptxas-report.json");
  const previous = fs.existsSync(reportFile) ? JSON.parse(fs.readFileSync(reportFile, "utf8")) : [];
  // Drop the last report's entries of every file recompiled now, so the old names of an
  // edited file's kernels do not linger (a kernel in an anonymous namespace is mangled with
  // a hash of its file's contents; a renamed or removed template instance is gone). Entries
  // of a report from before entries named their file: the file from an anonymous
  // namespace's mangled name ("_GLOBAL__N__<hash>_10_convert_cu_...") where it has one.
  const fresh = ptxasReport(r.log);
  const sourceOf = (k) => k.source ?? /_GLOBAL__N__[0-9a-f]+_\d+_(\w+?)_cu_/.exec(k.kernel)?.[1]?.concat(".cu");
  const recompiled = new Set(fresh.map((k) => k.source));
  const merged = new Map(previous.filter((k) => !recompiled.has(sourceOf(k))).map((k) => [`${k.kernel} ${k.arch}`, k]));
  for (const k of fresh) merged.set(`${k.kernel} ${k.arch}`, k);
  const report = [...merged.values()];
  if (report.length) fs.writeFileSync(reportFile, JSON.stringify(report, null, 1) + "\n");
  writeInfo("build", { built: true, nvcc });
  const spills = report.filter((k) => k.spillStoreBytes || k.spillLoadBytes);
  console.log(`kernels-cuda: CUDA addon built (${report.length} kernel x arch entries, ${spills.length} with register spills)`);
  return true;
}

function buildSim(asan) {
  // KILN_BUILD_DIR builds elsewhere (several builds side by side; load it with KILN_CUDA_SIM_ADDON).
  const dir = process.env.KILN_BUILD_DIR || (asan ? "build-sim-asan" : "build-sim");
  const include = findCudaInclude();
  const cxx = findSimCompiler();
  if (!include || !cxx) {
    const missing = !include ? "the CUDA headers (cuda_fp16.h, cuda_bf16.h; set KILN_CUDA_INCLUDE)" : "clang++ (set KILN_SIM_CXX)";
    writeInfo(dir, { built: false, reason: `the CUDA simulator was not built: ${missing} not found` });
    console.log(`kernels-cuda: ${missing} not found; the simulator is not built`);
    return true;
  }
  console.log(`kernels-cuda: building the simulator${asan ? " with AddressSanitizer" : ""} (${cxx})`);
  const defines = { KILN_SIM: "ON", KILN_CUDA_INCLUDE: include, CMAKE_CXX_COMPILER: cxx, CMAKE_BUILD_TYPE: asan ? "Debug" : "Release" };
  if (asan) defines.KILN_SIM_ASAN = "ON";
  defines.KILN_SIM_NATIVE = buildForHostCpu() ? "ON" : "OFF";
  // Always given (OFF, false to CMake: every file; cmake-js drops an empty define), so a
  // folder once built for some files builds all again.
  defines.KILN_KERNEL_FILES = process.env.KILN_KERNEL_FILES || "OFF";
  const r = cmake(dir, defines);
  fs.writeFileSync(path.resolve(root, dir, "build.log"), r.log);
  if (!r.ok) {
    writeInfo(dir, { built: false, reason: `the CUDA simulator failed to build; see packages/kernels-cuda/${dir}/build.log` });
    console.error(r.log.split("\n").filter((l) => /error/i.test(l)).slice(0, 40).join("\n"));
    return false;
  }
  writeInfo(dir, { built: true, cxx });
  return true;
}

const wanted = process.argv.slice(2);
const targets = wanted.length ? wanted : ["cuda", "sim"];
let ok = true;
for (const t of targets) {
  if (t === "cuda") ok = buildCuda() && ok;
  else if (t === "sim") ok = buildSim(false) && ok;
  else if (t === "asan") ok = buildSim(true) && ok;
  else {
    console.error(`build-addon: unknown target ${t} (cuda, sim, asan)`);
    process.exit(2);
  }
}
process.exit(ok ? 0 : 1);
