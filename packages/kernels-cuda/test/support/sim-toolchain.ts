import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

const which = (cmd: string) => {
  const r = spawnSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : undefined;
};

/** clang++ and the CUDA headers the simulator builds with, or why they are missing. */
export function simToolchain(): { cxx: string; cudaInclude: string } | { missing: string } {
  const cxx = process.env.KILN_SIM_CXX || which("clang++-16") || which("clang++");
  const cudaInclude = [process.env.KILN_CUDA_INCLUDE, "/usr/local/cuda/include"].find((d) => d && fs.existsSync(path.join(d, "cuda_bf16.h")));
  if (!cxx || !fs.existsSync(cxx)) return { missing: `${cxx ?? "clang++"} not found (the simulator builds with clang++-16)` };
  if (!cudaInclude) return { missing: "the CUDA headers (cuda_fp16.h, cuda_bf16.h) were not found; set KILN_CUDA_INCLUDE" };
  return { cxx, cudaInclude };
}

/** Compiles a host program from .cu sources with the simulator shim; returns its path. */
export function buildSimProgram(tc: { cxx: string; cudaInclude: string }, source: string, out: string, extraFlags: string[] = []): string {
  const csrc = path.join(PACKAGE_ROOT, "csrc");
  const args = [
    "-std=c++17", "-O1", "-g", ...extraFlags,
    "-include", path.join(csrc, "sim", "cuda_sim.h"), `-I${tc.cudaInclude}`, `-I${csrc}`, "-Wno-unknown-attributes",
    "-xc++", source, "-xnone", path.join(csrc, "sim", "fiber.cc"), path.join(csrc, "sim", "sim_scheduler.cc"),
    "-o", out,
  ];
  const r = spawnSync(tc.cxx, args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`building ${source} failed:\n${r.stderr}`);
  return out;
}
