import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT } from "./support/sim-toolchain.js";

// kiln declares the part of cuBLASLt it calls (csrc/blas/cublaslt_api.h) and loads
// the library at run time. Compiling those declarations against the real
// cublasLt.h proves values, layouts and signatures match; it runs wherever the
// header is: the CUDA toolkit with cuBLAS, pip's nvidia-cublas, or KILN_CUBLASLT_INCLUDE.
function headerDirs(): string[] {
  const dirs = [process.env.KILN_CUBLASLT_INCLUDE, "/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include", "/usr/include"];
  // pip's nvidia-* packages: <site-packages>/nvidia/<package>/include
  try {
    const roots = execFileSync("python3", ["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    for (const root of roots.split("\n").filter(Boolean)) for (const sub of fs.readdirSync(root)) dirs.push(path.join(root, sub, "include"));
  } catch {
    // no python3, or no nvidia packages
  }
  return dirs.filter((d): d is string => !!d);
}
const header = headerDirs().find((d) => fs.existsSync(path.join(d, "cublasLt.h")));
const cudaInclude = ["/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"].find((d) => fs.existsSync(path.join(d, "cuda_runtime_api.h")));
const skip = !header ? "no cublasLt.h on this machine (set KILN_CUBLASLT_INCLUDE to its folder)" : !cudaInclude ? "no CUDA toolkit headers" : "";

describe.skipIf(skip !== "")(`cuBLASLt declarations${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("match the real cublasLt.h", () => {
    const source = path.join(PACKAGE_ROOT, "test", "blas-api", "check_api.cc");
    let output = "";
    try {
      execFileSync("g++", ["-std=c++17", "-fsyntax-only", `-I${header}`, `-I${cudaInclude}`, source], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (err) {
      output = String((err as { stderr?: string }).stderr ?? err);
    }
    expect(output).toBe("");
  });
});
