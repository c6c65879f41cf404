import { copyFile, mkdir } from "node:fs/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { differingTensors, metricsLog, readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Stopping and resuming must not change training: the weights, optimizer state and
// losses after resuming are bit for bit those of a run that never stopped.
const N = 6;
const K = 3;

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("resume");
  await ws.writeTokens("data.bin", textTokens(3000));
});
afterEach(() => ws.remove());

async function writeConfig(schedule: "constant" | "cosine") {
  await ws.writeConfig("run.yaml", {
    trainer: { max_steps: N, save_interval: K, gradient_accumulation: 2, warmup_steps: 2, lr_schedule: schedule, eval_interval: 1000 },
  });
}

async function train(out: string, ...args: string[]) {
  return expectSuccess(await ws.run(["train", "-f", "run.yaml", "-d", "data.bin", "--output-dir", out, "--headless", ...args]), `kiln train ${args.join(" ")}`);
}

/** step, loss, grad_norm, learning_rate and epoch of the training lines for steps (from, to]. */
async function lossLines(dir: string, from: number, to: number) {
  const lines = (await metricsLog(dir)).filter((l) => "loss" in l && (l.step as number) > from && (l.step as number) <= to);
  return lines.map(({ step, loss, grad_norm, learning_rate, epoch }) => ({ step, loss, grad_norm, learning_rate, epoch }));
}

async function expectSameFinalState(a: string, b: string) {
  const [x, y] = await Promise.all([readCheckpoint(ws.path(a, `step_${N}.safetensors`)), readCheckpoint(ws.path(b, `step_${N}.safetensors`))]);
  expect(x.tensors.size).toBeGreaterThan(0);
  expect(differingTensors(x, y)).toEqual([]);
  expect(y.metadata).toEqual(x.metadata);
}

describe("--resume", () => {
  it("auto: k steps, then a second run to N, ends bit for bit where a straight run ends", async () => {
    await writeConfig("constant");
    await train("straight");
    await train("split", "--max-steps", String(K));
    expect((await stepCheckpoints(ws.path("split"))).map((c) => c.step)).toEqual([K]);
    const resumed = await train("split", "--resume", "auto");
    expect(resumed.stderr).toContain(`resumed from split/step_${K}.safetensors at step ${K}`);

    // The comparison can fail: training moved the weights between step K and step N.
    const atK = await readCheckpoint(ws.path("straight", `step_${K}.safetensors`));
    const atN = await readCheckpoint(ws.path("straight", `step_${N}.safetensors`));
    expect(differingTensors(atK, atN).length).toBeGreaterThan(0);

    await expectSameFinalState("straight", "split");
    const expected = await lossLines(ws.path("straight"), K, N);
    expect(expected.map((l) => l.step)).toEqual([4, 5, 6]);
    expect(await lossLines(ws.path("split"), K, N)).toEqual(expected);
    expect(await lossLines(ws.path("split"), 0, K)).toEqual(await lossLines(ws.path("straight"), 0, K));
  });

  it("with a path: resuming a copied checkpoint into a new folder ends where a straight run ends", async () => {
    await writeConfig("cosine");
    await train("straight");
    await mkdir(ws.path("saved"));
    await copyFile(ws.path("straight", `step_${K}.safetensors`), ws.path("saved", "middle.safetensors"));
    const resumed = await train("resumed", "--resume", "saved/middle.safetensors");
    expect(resumed.stderr).toContain(`resumed from saved/middle.safetensors at step ${K}`);

    await expectSameFinalState("straight", "resumed");
    const resumedLines = await lossLines(ws.path("resumed"), 0, N);
    expect(resumedLines.map((l) => l.step)).toEqual([4, 5, 6]);
    expect(resumedLines).toEqual(await lossLines(ws.path("straight"), K, N));
  });
});
