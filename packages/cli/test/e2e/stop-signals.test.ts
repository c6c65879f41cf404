import { existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { differingTensors, readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// SIGTERM (timeout, Slurm, Kubernetes, docker stop) and SIGHUP stop a run as Ctrl-C does:
// the step under way finishes, a checkpoint of it is written, the lock goes, and the exit
// code says which signal stopped it. A step longer than trainer.stop_grace is given up unsaved.
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("signals");
  // A constant learning rate: the schedule does not depend on max_steps, so a run stopped and resumed can be set against a straight one.
  await ws.writeConfig("long.yaml", { trainer: { max_steps: 100_000, save_interval: 100_000, log_interval: 1, lr_schedule: "constant" } });
  await ws.writeTokens("data.bin", textTokens(2000));
});
afterEach(() => ws.remove());

const TRAIN = ["train", "-f", "long.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu"];
const lastStep = (stdout: string) => jsonLines(stdout).filter((l) => "loss" in l).at(-1)!.step as number;

describe.each([
  ["SIGTERM", 143],
  ["SIGHUP", 129],
] as const)("%s during training", (signal, code) => {
  it(`saves the step reached, leaves no lock, exits ${code}; --resume auto continues bit-exactly`, async () => {
    const p = ws.start([...TRAIN, "--output-dir", "out"]);
    await p.until(() => p.stdoutLines.length >= 2, "two logged steps");
    p.child.kill(signal);
    const r = await p.exited;
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(code);
    const reached = lastStep(r.stdout);
    expect(r.stderr).toContain(`${signal}: stopping after this step, saving it and exiting`);
    expect(r.stderr).toContain(`saved out/step_${reached}.safetensors`);
    expect((await stepCheckpoints(ws.path("out"))).map((c) => c.step)).toEqual([reached]);
    expect(existsSync(ws.path("out", "kiln.lock"))).toBe(false);
    expect(existsSync(ws.path("out", "final.safetensors"))).toBe(false);

    const to = String(reached + 2);
    const resumed = expectSuccess(await ws.run([...TRAIN, "--output-dir", "out", "--resume", "auto", "--max-steps", to]), "resuming after the signal");
    expect(resumed.stderr).toContain(`resumed from out/step_${reached}.safetensors at step ${reached}`);
    expectSuccess(await ws.run([...TRAIN, "--output-dir", "straight", "--max-steps", to]), "the straight run");
    const [a, b] = await Promise.all([readCheckpoint(ws.path("straight", `step_${to}.safetensors`)), readCheckpoint(ws.path("out", `step_${to}.safetensors`))]);
    expect(a.tensors.size).toBeGreaterThan(0);
    expect(differingTensors(a, b)).toEqual([]);
  });
});

describe("a step longer than trainer.stop_grace", () => {
  it("is given up unsaved: exit 143, no lock, the earlier checkpoint untouched", async () => {
    // Steps of a few hundred milliseconds against a grace of none: the stop cannot wait for the step.
    await ws.writeConfig("slow.yaml", {
      model: { arch: "gpt2", vocab_size: 256, hidden_size: 128, num_layers: 4, num_heads: 4, max_seq_len: 128 },
      trainer: { max_steps: 100_000, save_interval: 2, batch_size: 8, seq_len: 128, log_interval: 1, stop_grace: 0 },
    });
    await ws.writeTokens("big.bin", textTokens(20_000));
    const p = ws.start(["train", "-f", "slow.yaml", "-d", "big.bin", "--headless", "--target-device", "cpu", "--output-dir", "out"]);
    await p.until(() => /saved out\/step_2\.safetensors/.test(p.stderr), "the checkpoint of step 2", 120_000);
    const saved = await readCheckpoint(ws.path("out", "step_2.safetensors"));
    p.child.kill("SIGTERM");
    const r = await p.exited;
    expect(r.code, r.stderr).toBe(143);
    expect(r.stderr).toMatch(/the step did not end within 0 s of SIGTERM \(trainer\.stop_grace\): quitting without saving the step under way; the newest checkpoint, of step 2, is in out \(--resume auto\)/);
    expect(existsSync(ws.path("out", "kiln.lock"))).toBe(false);
    const left = await stepCheckpoints(ws.path("out"));
    expect(left.map((c) => c.step)).toEqual([2]);
    expect(differingTensors(saved, await readCheckpoint(left[0].file))).toEqual([]);
  });
});

describe("SIGTERM to kiln train --ranks 2", () => {
  it("reaches every rank: they stop after the same step, rank 0 saves it, exit 143", async () => {
    const p = ws.start([...TRAIN, "--output-dir", "dp", "--ranks", "2", "--threads", "1"]);
    await p.until(() => p.stdoutLines.length >= 2, "two logged steps", 60_000);
    p.child.kill("SIGTERM");
    const r = await p.exited;
    expect(r.code, r.stderr).toBe(143);
    const reached = lastStep(r.stdout);
    expect((await stepCheckpoints(ws.path("dp"))).map((c) => c.step)).toEqual([reached]);
    expect(r.stderr).not.toMatch(/rank \d+ (was killed|exited with code)/);
    expect(existsSync(ws.path("dp", "kiln.lock"))).toBe(false);
    const saved = await readCheckpoint(ws.path("dp", `step_${reached}.safetensors`));
    expect(JSON.parse(saved.metadata["kiln.data_cursors"])).toHaveLength(2);
  });
});
