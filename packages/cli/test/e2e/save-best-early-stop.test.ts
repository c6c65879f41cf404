import { readdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { differingTensors, metricsLog, readCheckpoint } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// --save-best keeps the checkpoint of the lowest val_loss as best.safetensors;
// --early-stop N ends the run (normally: final.safetensors, exit 0) after N
// evaluations without a lower val_loss, and says so last.
let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("save-best");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 8, eval_interval: 1, eval_iters: 2, save_interval: 1, max_checkpoints: 20 } });
  await ws.writeTokens("data.bin", textTokens(3000));
});
afterAll(() => ws.remove());

const UNSTEADY = ["--learning-rate", "0.5", "--lr-schedule", "constant"];

async function valLosses(dir: string): Promise<{ step: number; loss: number }[]> {
  return (await metricsLog(ws.path(dir))).filter((l) => "val_loss" in l).map((l) => ({ step: l.step as number, loss: l.val_loss as number }));
}

describe("kiln train --save-best --early-stop", () => {
  it("best.safetensors is the step checkpoint of the lowest val_loss, and says which", async () => {
    // A learning rate this high makes val_loss jump about: its lowest is not the last.
    expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--save-best", ...UNSTEADY]), "kiln train --save-best");
    const evals = await valLosses("out");
    expect(evals).toHaveLength(8);
    const lowest = evals.reduce((a, b) => (b.loss < a.loss ? b : a));
    expect(lowest.step).toBeLessThan(8);
    const best = await readCheckpoint(ws.path("out", "best.safetensors"));
    const recorded = JSON.parse(best.metadata["kiln.best_val_loss"]!) as { step: number; loss: number };
    expect(recorded.step).toBe(lowest.step);
    expect(recorded.loss).toBeCloseTo(lowest.loss, 5);
    expect(best.metadata["kiln.step"]).toBe(String(lowest.step));
    expect(differingTensors(best, await readCheckpoint(ws.path("out", `step_${lowest.step}.safetensors`)))).toEqual([]);
    expect((await readdir(ws.path("out"))).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("--early-stop 2 stops two evaluations after the lowest val_loss, writes final.safetensors and ends with the reason", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "stopped", "--headless", "--early-stop", "2", ...UNSTEADY, "--learning-rate", "1"]), "kiln train --early-stop");
    const evals = await valLosses("stopped");
    const lowest = evals.reduce((a, b) => (b.loss < a.loss ? b : a));
    expect(evals.at(-1)!.step).toBe(lowest.step + 2);
    expect(evals.at(-1)!.step).toBeLessThan(8);
    const last = r.stderr.trimEnd().split("\n").at(-1);
    expect(last).toBe(`early stop at step ${lowest.step + 2}: val_loss has not improved on ${lowest.loss.toFixed(4)} (step ${lowest.step}) for 2 evaluations`);
    const files = await readdir(ws.path("stopped"));
    expect(files).toContain("final.safetensors");
    expect(files).not.toContain("best.safetensors");
  });
});
