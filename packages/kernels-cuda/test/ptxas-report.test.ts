import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { cudaStatus } from "@kiln/kernels-cuda";
import { PACKAGE_ROOT } from "./support/sim-toolchain.js";

// The real addon's build keeps ptxas's resource report (registers, shared memory,
// spills) for every kernel on every arch: check the build covers every arch and
// that no kernel spills registers to local memory.
const status = cudaStatus();
const reportFile = path.join(PACKAGE_ROOT, "build", "ptxas-report.json");

describe.skipIf(!status.addon.built)(`ptxas resource report${status.addon.built ? "" : ` (skipped: ${status.addon.detail})`}`, () => {
  const report = status.addon.built
    ? (JSON.parse(fs.readFileSync(reportFile, "utf8")) as { kernel: string; arch: string; registers: number; spillStoreBytes: number; spillLoadBytes: number }[])
    : [];

  it("has every kernel compiled for every arch", () => {
    const archs = new Set(report.map((r) => r.arch));
    for (const a of status.addon.archs) expect(archs, `sm_${a}`).toContain(`sm_${a}`);
    const perArch = status.addon.archs.map((a) => report.filter((r) => r.arch === `sm_${a}`).length);
    expect(new Set(perArch).size, `kernels per arch: ${perArch.join(", ")}`).toBe(1);
    expect(perArch[0]).toBeGreaterThan(10);
  });

  it("has no register spills", () => {
    const spills = report.filter((r) => r.spillStoreBytes > 0 || r.spillLoadBytes > 0).map((r) => `${r.kernel} ${r.arch}: ${r.spillStoreBytes} B stored, ${r.spillLoadBytes} B loaded`);
    expect(spills).toEqual([]);
  });
});
