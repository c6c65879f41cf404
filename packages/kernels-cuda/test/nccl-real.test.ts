import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DeviceError } from "@kiln/contract";
import { createCudaSimBackend, cudaStatus, ncclLibraryStatus, ncclUniqueId, openNcclCollectives } from "../src/index.js";
import { PACKAGE_ROOT } from "./support/sim-toolchain.js";

// A real NCCL without a GPU: pip's nvidia-nccl wheel (a zip) holds libnccl.so.2 and
// nccl.h. Its nccl.h checks kiln's declarations (csrc/comm/nccl_api.h); its library
// is loaded and asked for its version and a unique id, which need no GPU. The wheel
// is looked for in KILN_NCCL_WHEEL, then the local package mirrors; absent, skipped.
function findWheel(): string | undefined {
  if (process.env.KILN_NCCL_WHEEL) return process.env.KILN_NCCL_WHEEL;
  for (const dir of ["/opt/pypi/files", "/opt/pypi-more/files"]) {
    if (!fs.existsSync(dir)) continue;
    const wheel = fs.readdirSync(dir).find((f) => /^nvidia_nccl_cu1\d-[\d.]+-.*\.whl$/.test(f));
    if (wheel) return path.join(dir, wheel);
  }
  return undefined;
}

const wheel = findWheel();
const hasPython = spawnSync("python3", ["-c", "import zipfile"]).status === 0;
const st = cudaStatus();
const skip = !wheel
  ? "no nvidia-nccl wheel (set KILN_NCCL_WHEEL to one)"
  : !hasPython
    ? "no python3 to unpack the wheel with"
    : !st.addon.built && !st.simulator.built
      ? "neither the CUDA addon nor the simulator is built"
      : "";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-nccl-wheel-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Extracts the members of the wheel's NCCL folder that `pattern` matches into `dir`; returns that folder. */
function unpack(pattern: string): string {
  const script = `import re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.startswith("nvidia/nccl/") and re.search(sys.argv[3], n): z.extract(n, sys.argv[2])`;
  execFileSync("python3", ["-c", script, wheel!, dir, pattern]);
  return path.join(dir, "nvidia", "nccl");
}

describe.skipIf(skip)(`a real NCCL from pip's wheel${skip ? ` (skipped: ${skip})` : ""}`, () => {
  const version = wheel ? /nvidia_nccl_cu1\d-([\d.]+)-/.exec(path.basename(wheel))?.[1] : undefined;

  it("has the values, sizes and function shapes kiln declares (nccl_api.h against its nccl.h)", (ctx) => {
    const cudaInclude = ["/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"].find((d) => fs.existsSync(path.join(d, "cuda_runtime.h")));
    if (!cudaInclude) ctx.skip("nccl.h includes cuda_runtime.h, and the CUDA toolkit's headers are not here");
    const root = unpack("include/nccl\\.h$");
    const r = spawnSync("g++", ["-std=c++17", "-fsyntax-only", `-I${path.join(root, "include")}`, `-I${cudaInclude}`, path.join(PACKAGE_ROOT, "test", "nccl-api", "check_api.cc")], {
      encoding: "utf8",
    });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("is found with its version and makes unique ids, without a GPU; joining without one fails with NCCL's reason", async (ctx) => {
    const lib = path.join(unpack("lib/libnccl\\.so\\.2$"), "lib", "libnccl.so.2");
    const saved = process.env.KILN_NCCL_LIBRARY;
    process.env.KILN_NCCL_LIBRARY = lib;
    try {
      expect(ncclLibraryStatus()).toEqual({ found: true, path: lib, version });
      const id = ncclUniqueId();
      expect(id.length).toBe(128);
      expect(id.some((b) => b !== 0)).toBe(true);
      // On the simulator's device: NCCL's own CUDA calls find no GPU, and the join says so.
      if (!st.simulator.built || fs.existsSync("/proc/driver/nvidia/version")) ctx.skip("joining needs the simulator and a machine without an NVIDIA driver");
      const backend = createCudaSimBackend();
      const err = await openNcclCollectives(backend, { uniqueId: id, rank: 0, worldSize: 1 }).catch((e: unknown) => e);
      backend.dispose();
      expect(err).toBeInstanceOf(DeviceError);
      expect((err as DeviceError).message).toMatch(/^ncclCommInitRank \(rank 0 of 1\) failed: unhandled cuda error .*\(ncclUnhandledCudaError, 1\)$/);
    } finally {
      if (saved === undefined) delete process.env.KILN_NCCL_LIBRARY;
      else process.env.KILN_NCCL_LIBRARY = saved;
    }
  });
});
