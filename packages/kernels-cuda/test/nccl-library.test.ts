import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { DeviceError } from "@kiln/contract";
import { cudaStatus, ncclLibraryStatus, ncclUniqueId } from "../src/index.js";
import { buildFakeNccl, fakeNcclSkipReason } from "./support/fake-nccl.js";

// Finding NCCL and refusing what kiln cannot use, through fakes of libnccl.so.2
// built here: no GPU and no NCCL needed, only an addon (the CUDA one or the
// simulator: the probe runs in either) and a C compiler.
const st = cudaStatus();
const skip = !st.addon.built && !st.simulator.built ? "neither the CUDA addon nor the simulator is built" : fakeNcclSkipReason();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-nccl-"));
const saved = process.env.KILN_NCCL_LIBRARY;

afterEach(() => {
  if (saved === undefined) delete process.env.KILN_NCCL_LIBRARY;
  else process.env.KILN_NCCL_LIBRARY = saved;
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe.skipIf(skip)(`NCCL library${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("reports a usable NCCL with its file and version, and makes 128-byte unique ids", () => {
    const file = buildFakeNccl(dir, "found/libnccl.so.2", { version: 23007 });
    process.env.KILN_NCCL_LIBRARY = file;
    expect(ncclLibraryStatus()).toEqual({ found: true, path: file, version: "2.30.7" });
    const a = ncclUniqueId();
    const b = ncclUniqueId();
    expect(a).toBeInstanceOf(Uint8Array);
    expect(a.length).toBe(128);
    expect(Buffer.from(a).toString("latin1")).toMatch(/^fake-nccl-/);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
    // cudaStatus (and so `kiln doctor`) gives the same answer.
    const s = cudaStatus();
    expect(s.nccl).toEqual({ found: true, path: file, version: "2.30.7" });
    expect(s.libraries.nccl).toBe(file);
    expect(s.libraryVersions.nccl).toBe("2.30.7");
  });

  it("says NCCL is missing, with the loader's reason and what to install, without throwing", () => {
    const file = path.join(dir, "nowhere", "libnccl.so.2");
    process.env.KILN_NCCL_LIBRARY = file;
    const s = ncclLibraryStatus();
    expect(s.found).toBe(false);
    if (s.found) return;
    expect(s.problem).toBe(`KILN_NCCL_LIBRARY=${file}: cannot load NCCL (${file}): ${file}: cannot open shared object file: No such file or directory`);
    expect(s.hint).toMatch(/install NCCL 2\.10 or newer \(pip install nvidia-nccl-cu13, or nvidia-nccl-cu12 for CUDA 12/);
    expect(s.hint).toMatch(/LD_LIBRARY_PATH, or set KILN_NCCL_LIBRARY/);
    expect(() => ncclUniqueId()).toThrow(DeviceError);
    expect(() => ncclUniqueId()).toThrow(/NCCL is not usable: KILN_NCCL_LIBRARY=.*cannot open shared object file/);
  });

  it("says which NCCL was looked for when none is set and none is installed", () => {
    delete process.env.KILN_NCCL_LIBRARY;
    const s = ncclLibraryStatus();
    // A machine with a real NCCL finds it; this one (no NCCL packaged) reports the dlopen failure.
    if (s.found) expect(s.version).toMatch(/^2\.\d+\.\d+$/);
    else expect(s.problem).toMatch(/cannot load NCCL \(.*libnccl\.so\.2\)/);
  });

  it("refuses an NCCL older than 2.10, naming its version and the minimum", () => {
    const file = buildFakeNccl(dir, "old/libnccl.so.2", { version: 20900 });
    process.env.KILN_NCCL_LIBRARY = file;
    const s = ncclLibraryStatus();
    expect(s).toMatchObject({ found: false, problem: `KILN_NCCL_LIBRARY=${file}: the NCCL at ${file} is version 2.9.0; kiln needs NCCL 2.10.0 or newer (for ncclAvg and bfloat16)` });
    // NCCL before 2.9 encoded its version differently (2.8.4 is 2804).
    process.env.KILN_NCCL_LIBRARY = buildFakeNccl(dir, "older/libnccl.so.2", { version: 2804 });
    expect(ncclLibraryStatus()).toMatchObject({ found: false, problem: expect.stringMatching(/is version 2\.8\.4; kiln needs NCCL 2\.10\.0 or newer/) });
    // cudaStatus keeps the file and its version, saying why it cannot be used.
    expect(cudaStatus().libraryVersions.nccl).toMatch(/^2\.8\.4 \(not usable: .*is version 2\.8\.4; kiln needs NCCL 2\.10\.0 or newer/);
  });

  it("refuses a library that lacks a function kiln calls, naming it", () => {
    const file = buildFakeNccl(dir, "partial/libnccl.so.2", { withoutAsyncError: true });
    process.env.KILN_NCCL_LIBRARY = file;
    const s = ncclLibraryStatus();
    expect(s).toMatchObject({
      found: false,
      problem: `KILN_NCCL_LIBRARY=${file}: the NCCL library at ${file} (version 2.30.7) has no ncclCommGetAsyncError: it is not an NCCL build kiln can use`,
      hint: expect.stringMatching(/^the file KILN_NCCL_LIBRARY names is not a complete NCCL: install NCCL/),
    });
  });
});
