import { ConfigError } from "@kiln/contract";
import { describe, expect, it } from "vitest";
import { KNOWN_DEVICES, deviceProfile, plannedDevice } from "../src/estimate/devices.js";
import { parseByteSize } from "../src/estimate/parse-size.js";

const GiB = 2 ** 30;

describe("the devices kiln estimate knows", () => {
  it("include the common training GPUs", () => {
    expect(KNOWN_DEVICES).toEqual(expect.arrayContaining(["cpu", "h100", "h200", "b200", "a100-80", "a30", "l40s", "l4", "rtx3090", "rtx4090", "rtx5090", "v100", "t4"]));
  });

  it("give T4 and V100 no bf16 peak, and say kiln's kernels do not run there", () => {
    for (const name of ["t4", "v100"]) {
      const d = deviceProfile(name)!;
      expect(d.peakFlops.bf16, name).toBe(0);
      expect(d.peakFlops.f16, name).toBeGreaterThan(d.peakFlops.f32);
      expect(d.unsupported, name).toMatch(/kiln's CUDA kernels are built for sm_80 and newer/);
    }
    expect(deviceProfile("a30")!.unsupported).toBeUndefined();
  });

  it("give every GPU its memory bandwidth (for the roofline), and the CPU none", () => {
    for (const name of KNOWN_DEVICES.filter((d) => d !== "cpu")) {
      const bw = deviceProfile(name)!.memoryBandwidth!;
      expect(bw, name).toBeGreaterThanOrEqual(0.3e12);
      expect(bw, name).toBeLessThanOrEqual(8e12);
    }
    expect(deviceProfile("h100")!.memoryBandwidth).toBe(3.35e12);
    expect(deviceProfile("cpu")!.memoryBandwidth).toBeUndefined();
  });
});

describe("plannedDevice", () => {
  it("is this CPU for auto on a machine without a GPU, and for cpu", async () => {
    expect((await plannedDevice("auto", undefined, "--target-device", false)).name).toMatch(/^this CPU/);
    expect((await plannedDevice("cpu", undefined, "--target-device")).name).toMatch(/^this CPU/);
  });

  it("plans for an H100 when a run targets a GPU and this machine has none, and says so", async () => {
    const d = await plannedDevice("gpu", undefined, "--target-device");
    expect(d).toMatchObject({ name: "NVIDIA H100 SXM 80GB" });
    expect(d.note).toMatch(/^no usable GPU here, so this plans for the NVIDIA H100 SXM 80GB; name another with --target-device \(.*h100, h200, .*t4\)$/);
  });

  it("takes --device-memory in place of a known device's memory", async () => {
    const d = await plannedDevice("h100", 40 * GiB, "--device");
    expect(d).toMatchObject({ memoryBytes: 40 * GiB, name: "NVIDIA H100 SXM 80GB (--device-memory)" });
    expect(d.peakFlops.bf16).toBe(deviceProfile("h100")!.peakFlops.bf16);
  });

  it("plans for any other device by its memory alone", async () => {
    expect(await plannedDevice("rtx2080", 8 * GiB, "--device")).toEqual({ name: "rtx2080", memoryBytes: 8 * GiB, peakFlops: { f32: 0, bf16: 0, f16: 0 } });
    expect(await plannedDevice("auto", 24 * GiB, "--target-device", false)).toMatchObject({ memoryBytes: 24 * GiB, name: "a device" });
  });

  it("refuses an unknown name without a memory size, pointing at --device-memory", async () => {
    await expect(plannedDevice("rtx2080", undefined, "--device")).rejects.toThrow(ConfigError);
    await expect(plannedDevice("rtx2080", undefined, "--device")).rejects.toThrow(expect.objectContaining({ where: "--device", hint: expect.stringMatching(/--device-memory 24GiB/) }));
  });
});

describe("parseByteSize", () => {
  it("reads binary and decimal units", () => {
    expect(parseByteSize("24GiB")).toBe(24 * GiB);
    expect(parseByteSize("24G")).toBe(24 * GiB);
    expect(parseByteSize("80GB")).toBe(80e9);
    expect(parseByteSize("1.5 TiB")).toBe(1.5 * 2 ** 40);
    expect(parseByteSize("512mib")).toBe(512 * 2 ** 20);
  });

  it("refuses a size without a unit, or with one it does not know", () => {
    for (const bad of ["24", "24 gigs", "GiB", "-1GiB", "0GiB"]) expect(() => parseByteSize(bad), bad).toThrow(/expected a size/);
  });
});
