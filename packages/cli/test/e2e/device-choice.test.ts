import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRefused } from "./support/expectations.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

const HAS_NVIDIA_DRIVER = existsSync("/proc/driver/nvidia/version");

describe("which device kiln train picks", () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await Workspace.create("device");
    await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 1 } });
    await ws.writeTokens("data.bin", textTokens(2000));
  });
  afterAll(() => ws?.remove());

  // The CLI's own choice: the test backend is not pinned.
  it.skipIf(HAS_NVIDIA_DRIVER)("auto (the default) trains on the CPU without a GPU and says why in the banner", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "auto", "--headless"], { pinBackend: false }), "training with auto");
    expect(r.stderr).toMatch(/device\s+WebAssembly SIMD .*\(training on the CPU: no usable GPU \(no NVIDIA driver/);
  });

  it.skipIf(HAS_NVIDIA_DRIVER)("a config's target_device: gpu without a GPU is refused naming the file, its line and the key, not a flag", async () => {
    await ws.writeConfig("gpu.yaml", { trainer: { max_steps: 1, target_device: "gpu" } });
    const line = (await import("node:fs")).readFileSync(ws.path("gpu.yaml"), "utf8").split("\n").findIndex((l) => l.includes("target_device")) + 1;
    const r = await ws.run(["train", "-f", "gpu.yaml", "-d", "data.bin", "--output-dir", "gpu", "--headless"], { pinBackend: false });
    expectRefused(r, {
      kind: "DeviceError",
      where: `gpu.yaml:${line}`,
      message: new RegExp(`^trainer\\.target_device \\(line ${line}\\) is gpu, but kiln cannot use the GPU`),
      hint: /^set trainer\.target_device to auto or cpu in gpu\.yaml, or pass --target-device cpu/,
    });
    expect(r.stderr).not.toContain("in --target-device");
  });

  it("refuses an unknown KILN_BACKEND, listing the backends", async () => {
    expectRefused(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "bogus", "--headless"], { env: { KILN_BACKEND: "tpu" } }), {
      kind: "DeviceError",
      where: "KILN_BACKEND",
      message: /^KILN_BACKEND=tpu is not a backend/,
      hint: /cpu, gpu, cuda-sim, reference/,
    });
  });
});
