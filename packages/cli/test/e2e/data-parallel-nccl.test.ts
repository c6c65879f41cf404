import { spawnSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaStatus } from "@kiln/kernels-cuda";
import { metricsLog, readCheckpoint } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { REPO_ROOT } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// GPU data parallel without a GPU: the ranks train on the CUDA simulator (KILN_BACKEND=cuda-sim)
// and sync through the nccl backend, with a stand-in libnccl (kernels-cuda's test fake, which
// meets the ranks' processes in shared memory and sums in rank order) built here. 2 GPUs x batch 2
// must train like 1 rank x batch 4 on the same simulator.
const sim = cudaStatus().simulator;
const cc = spawnSync("sh", ["-c", "command -v cc"]).status === 0;
const skip = !sim.built ? `the CUDA simulator is not built: ${sim.detail}` : !cc ? "no C compiler to build the stand-in NCCL" : undefined;

let ws: Workspace;
let fakeNccl: string;
beforeAll(async () => {
  if (skip) return;
  ws = await Workspace.create("data-parallel-nccl");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 3, save_interval: 100, eval_interval: 100 } });
  await ws.writeTokens("data.bin", textTokens(4000));
  fakeNccl = ws.path("libnccl-fake.so");
  const source = path.join(REPO_ROOT, "packages", "kernels-cuda", "test", "support", "fake_nccl.c");
  const r = spawnSync("cc", ["-shared", "-fPIC", "-O1", "-o", fakeNccl, source, "-lrt"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`building the stand-in NCCL failed:\n${r.stderr}`);
});
afterAll(() => ws?.remove());

const TRAIN = ["train", "-f", "tiny.yaml", "-d", "data.bin", "--headless"];
const losses = (stdout: string) => jsonLines(stdout).filter((l) => "loss" in l).map((l) => l.loss as number);

describe.skipIf(skip !== undefined)(`kiln train --gpus 0,1 on the CUDA simulator${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("syncs through NCCL by default and trains like one rank with the whole batch", async () => {
    const env = { KILN_BACKEND: "cuda-sim", KILN_NCCL_LIBRARY: fakeNccl };
    const two = expectSuccess(await ws.run([...TRAIN, "--gpus", "0,1", "--batch-size", "2", "--output-dir", "two"], { env }), "2 GPUs");
    const one = expectSuccess(await ws.run([...TRAIN, "--batch-size", "4", "--output-dir", "one"], { env }), "1 GPU");
    expect(two.stderr).toMatch(/ranks {3}2 processes, nccl sync \(default for GPU ranks: NCCL 2\.30\.7 found\) through NCCL on the devices/);
    const [a, b] = [losses(two.stdout), losses(one.stdout)];
    expect(a).toHaveLength(3);
    for (const [i, x] of a.entries()) expect(Math.abs(x - b[i]) / b[i], `loss at step ${i + 1}`).toBeLessThan(2e-6);
    const [wa, wb] = await Promise.all([readCheckpoint(ws.path("two", "final.safetensors")), readCheckpoint(ws.path("one", "final.safetensors"))]);
    for (const [name, bytes] of wb.tensors) {
      const x = new Float32Array(wa.tensors.get(name)!.slice().buffer);
      const y = new Float32Array(bytes.slice().buffer);
      expect(Math.max(...x.map((v, i) => Math.abs(v - y[i]))), name).toBeLessThan(1e-6);
    }
  }, 300_000);

  it("shards the optimizer state over the GPUs (--shard-optimizer): NCCL's reduce-scatter and all-gather, the unsharded run's losses and weights", async () => {
    const env = { KILN_BACKEND: "cuda-sim", KILN_NCCL_LIBRARY: fakeNccl };
    const sharded = expectSuccess(await ws.run([...TRAIN, "--gpus", "0,1", "--batch-size", "2", "--shard-optimizer", "--output-dir", "sharded"], { env }), "2 GPUs sharded");
    expect(sharded.stderr).toMatch(/optimizer state sharded over the 2 ranks \(ZeRO stage 1/);
    // "two": the first test's unsharded run of the same ranks.
    const [a, b] = [losses(sharded.stdout), (await metricsLog(ws.path("two"))).filter((l) => "loss" in l).map((l) => l.loss as number)];
    expect(a).toHaveLength(3);
    for (const [i, x] of a.entries()) expect(Math.abs(x - b[i]) / b[i], `loss at step ${i + 1}`).toBeLessThan(2e-6);
    const [wa, wb] = await Promise.all([readCheckpoint(ws.path("sharded", "final.safetensors")), readCheckpoint(ws.path("two", "final.safetensors"))]);
    for (const [name, bytes] of wb.tensors) {
      const x = new Float32Array(wa.tensors.get(name)!.slice().buffer);
      const y = new Float32Array(bytes.slice().buffer);
      expect(Math.max(...x.map((v, i) => Math.abs(v - y[i]))), name).toBeLessThan(1e-6);
    }
  }, 300_000);

  it("refuses nccl for ranks on the CPU, and --gpus with --target-device cpu", async () => {
    const cpuNccl = await ws.run([...TRAIN, "--ranks", "2", "--sync-backend", "nccl", "--target-device", "cpu", "--output-dir", "bad1"]);
    expect(cpuNccl.code).toBe(1);
    expect(cpuNccl.stderr).toMatch(/ConfigError in --sync-backend: --sync-backend nccl syncs GPU buffers, but this run trains on the CPU/);
    const gpusOnCpu = await ws.run([...TRAIN, "--gpus", "0,1", "--target-device", "cpu", "--output-dir", "bad2"]);
    expect(gpusOnCpu.code).toBe(1);
    expect(gpusOnCpu.stderr).toMatch(/ConfigError in --gpus: --gpus trains on GPUs, but the target device is cpu/);
    const badList = await ws.run([...TRAIN, "--gpus", "0,0", "--output-dir", "bad3"]);
    expect(badList.code).not.toBe(0);
    expect(badList.stderr).toMatch(/each GPU may be named once, got "0,0"/);
  });
});
