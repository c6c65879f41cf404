import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { expectRefused, treeChanges } from "./support/expectations.js";
import { trainTiny } from "./support/runs.js";
import { Workspace } from "./support/workspace.js";

// Problems with where checkpoints go or come from, and with the device, are refused
// before the first step; earlier checkpoints stay byte for byte as they were.
let trained: Workspace;
let ws: Workspace;
beforeAll(async () => {
  trained = await Workspace.create("output-run");
  await trainTiny(trained, "out");
});
afterAll(() => trained.remove());
beforeEach(async () => {
  ws = await Workspace.copyOf("output", trained);
});
afterEach(() => ws.remove());

async function refuse(args: string[], extra: { pinBackend?: boolean } = {}) {
  const before = await ws.snapshot();
  expect([...before.keys()]).toEqual(expect.arrayContaining(["out/step_2.safetensors", "out/step_4.safetensors"]));
  const r = await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--headless", ...args], extra);
  expect(treeChanges(before, await ws.snapshot())).toEqual([]);
  return r;
}

/** The first `fraction` of a real checkpoint: its header intact, its tensor data cut short. */
async function truncatedCheckpoint(name: string, fraction: number) {
  const whole = await readFile(ws.path("out", "step_2.safetensors"));
  return ws.write(name, whole.subarray(0, Math.floor(whole.length * fraction)));
}

/** Bytes that look like nothing (a fixed xorshift stream, so the failure is reproducible). */
function noise(length: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = 0x9e3779b9;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const HAS_NVIDIA_DRIVER = existsSync("/proc/driver/nvidia/version");

describe("kiln train refuses bad checkpoint paths and devices", () => {
  it("an output folder whose parent is a regular file", async () => {
    await ws.write("notes.txt", "not a folder\n");
    expectRefused(await refuse(["--output-dir", "notes.txt/run"]), {
      kind: "CheckpointError",
      where: "notes.txt/run",
      message: /^cannot write checkpoints to this folder: a parent of the output path is a file, not a directory/,
      hint: /choose another --output-dir/,
    });
    expect(await readFile(ws.path("notes.txt"), "utf8")).toBe("not a folder\n");
  });

  it("--resume with a truncated checkpoint", async () => {
    await truncatedCheckpoint("cut.safetensors", 0.9);
    expectRefused(await refuse(["--output-dir", "out", "--resume", "cut.safetensors"]), {
      kind: "CheckpointError",
      where: /cut\.safetensors \(tensor "[^"]+"\)/,
      message: /run past the end of the data buffer .*the file is truncated/,
      hint: /copied completely.*load an earlier checkpoint/,
    });
  });

  it("--resume with a file of random bytes", async () => {
    await ws.write("noise.safetensors", noise(64 * 1024));
    expectRefused(await refuse(["--output-dir", "new-run", "--resume", "noise.safetensors"]), {
      kind: "CheckpointError",
      where: "noise.safetensors",
      message: /header length field says \d+ bytes/,
      hint: /names a \.safetensors file/,
    });
    expect(existsSync(ws.path("new-run"))).toBe(false);
  });

  it("--resume auto when every step checkpoint is truncated", async () => {
    for (const step of [6, 4, 2]) await truncatedCheckpoint(`out/step_${step}.safetensors`, 0.5);
    expectRefused(await refuse(["--output-dir", "out", "--resume", "auto"]), {
      kind: "CheckpointError",
      where: /out\/step_6\.safetensors \(tensor "[^"]+"\)/,
      message: /the file is truncated.*; none of the 3 step checkpoints in out opens$/,
      hint: /load an earlier checkpoint.*Else start afresh with --overwrite/,
    });
  });

  it("--resume with a checkpoint that does not exist", async () => {
    expectRefused(await refuse(["--output-dir", "out", "--resume", "out/step_9.safetensors"]), {
      kind: "CheckpointError",
      where: "out/step_9.safetensors",
      message: /^the checkpoint to resume from does not exist/,
      hint: /--resume auto/,
    });
  });

  // The GPU test needs the CLI's own device choice, so the test backend is not pinned for it.
  it.skipIf(HAS_NVIDIA_DRIVER)("--target-device gpu without CUDA (skipped on machines with an NVIDIA driver, where the GPU path would run)", async () => {
    expectRefused(await refuse(["--output-dir", "gpu-run", "--target-device", "gpu"], { pinBackend: false }), {
      kind: "DeviceError",
      where: "--target-device gpu",
      message: /^cannot use the GPU: no NVIDIA driver/,
      hint: /--target-device cpu/,
    });
    expect(existsSync(ws.path("gpu-run"))).toBe(false);
  });
});
