import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DeviceError } from "@kiln/contract";
import { createCudaBackend, cudaStatus, findSharedLibrary } from "@kiln/kernels-cuda";
import { buildFakeNccl } from "./support/fake-nccl.js";

const hasDriver = fs.existsSync("/proc/driver/nvidia/version");
const built = cudaStatus().addon.built;

describe("cuda status", () => {
  it("reports the driver as this machine has it", () => {
    const s = cudaStatus();
    expect(s.driver.found).toBe(hasDriver && findSharedLibrary(["libcuda.so.1", "libcuda.so"]) !== null);
    expect(s.driver.detail.length).toBeGreaterThan(10);
  });

  it.skipIf(!built)("loads the built addon without a driver and reports its archs and why no GPU is usable", () => {
    const s = cudaStatus();
    expect(s.addon.archs).toEqual(["80", "86", "89", "90a", "100", "120"]);
    if (!hasDriver) {
      expect(s.runtime.deviceCount).toBe(0);
      expect(s.runtime.error).toBe("no NVIDIA driver");
    }
  });

  it.skipIf(hasDriver)("refuses the GPU backend without a driver, saying what is missing and what to do", () => {
    let err: unknown;
    try {
      createCudaBackend();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DeviceError);
    const e = err as DeviceError;
    expect(e.message).toMatch(/no NVIDIA driver/);
    expect(e.hint).toMatch(/--target-device cpu/);
  });

  it("finds a shared library through LD_LIBRARY_PATH", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-lib-"));
    const file = path.join(dir, "libkilnprobe.so.7");
    fs.writeFileSync(file, "");
    const saved = process.env.LD_LIBRARY_PATH;
    process.env.LD_LIBRARY_PATH = dir;
    try {
      expect(findSharedLibrary(["libmissing.so", "libkilnprobe.so.7"])).toBe(file);
      expect(findSharedLibrary(["libdefinitely-not-here.so.99"])).toBeNull();
    } finally {
      process.env.LD_LIBRARY_PATH = saved;
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe("optional NVIDIA libraries", () => {
  const st = cudaStatus();
  it.skipIf(!st.addon.built && !st.simulator.built)("reads cuBLASLt's and NCCL's versions from the libraries found (fakes built here; NCCL found through LD_LIBRARY_PATH)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-fake-libs-"));
    const build = (name: string, source: string) => {
      const c = path.join(dir, `${name}.c`);
      fs.writeFileSync(c, source);
      execFileSync("cc", ["-shared", "-fPIC", "-o", path.join(dir, name), c]);
    };
    build("libcublasLt.so.13", "#include <stddef.h>\nsize_t cublasLtGetVersion(void) { return 130002; }\n");
    buildFakeNccl(dir, "libnccl.so.2", { version: 22703 });
    const saved = process.env.LD_LIBRARY_PATH;
    process.env.LD_LIBRARY_PATH = dir;
    try {
      const s = cudaStatus();
      expect(s.libraries.cublasLt).toBe(path.join(dir, "libcublasLt.so.13"));
      expect(s.libraryVersions).toEqual({ cublasLt: "13.0.2", nccl: "2.27.3" });
      expect(s.nccl).toEqual({ found: true, path: path.join(dir, "libnccl.so.2"), version: "2.27.3" });
    } finally {
      process.env.LD_LIBRARY_PATH = saved;
      fs.rmSync(dir, { recursive: true });
    }
  });
});
