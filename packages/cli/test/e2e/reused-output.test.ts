import { existsSync } from "node:fs";
import { readdir, truncate, stat } from "node:fs/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { differingTensors, metricsLog, readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { TINY_MODEL, Workspace, snapshotTree, textTokens } from "./support/workspace.js";

// A folder that holds a run is written only by a run that asks for it; --resume checks
// the model against the checkpoint; --resume auto passes over a damaged newest checkpoint.
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("reuse");
  await ws.writeConfig("run.yaml", { trainer: { max_steps: 6, save_interval: 2, max_checkpoints: 5, eval_interval: 1000 } });
  await ws.writeTokens("data.bin", textTokens(3000));
});
afterEach(() => ws.remove());

const train = (...args: string[]) => ws.run(["train", "-f", "run.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", ...args]);

describe("an output folder that holds an earlier run", () => {
  it("is refused without --resume, naming what is there and the ways on, and nothing of it changes", async () => {
    expectSuccess(await train(), "the first run");
    const before = await snapshotTree(ws.path("out"));
    const r = await train("--max-steps", "2");
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("kiln: CheckpointError in out: the output folder holds an earlier run (final.safetensors, metrics.jsonl, step_2.safetensors, step_4.safetensors, step_6.safetensors, tensorboard)");
    expect(r.stderr).toMatch(/--resume auto; or give this run its own --output-dir; or pass --overwrite/);
    expect(await snapshotTree(ws.path("out"))).toEqual(before);
  });

  it("--overwrite moves the earlier run into a dated folder whole, and the new run starts alone", async () => {
    expectSuccess(await train(), "the first run");
    const before = await snapshotTree(ws.path("out"));
    const r = expectSuccess(await train("--max-steps", "2", "--overwrite"), "the run with --overwrite");
    const aside = (await readdir(ws.path("out"))).filter((n) => n.startsWith("earlier-run-"));
    expect(aside).toHaveLength(1);
    expect(aside[0]).toMatch(/^earlier-run-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d$/);
    expect(r.stderr).toContain(`moved the earlier run in out to out/${aside[0]}`);
    // Every file of the earlier run, byte for byte, under the dated folder.
    const moved = await snapshotTree(ws.path("out", aside[0]));
    for (const [name, entry] of before) expect(moved.get(name)?.sha256, name).toBe(entry.sha256);
    expect((await stepCheckpoints(ws.path("out"))).map((c) => c.step)).toEqual([2]);
    expect(jsonLines(r.stdout).filter((l) => "loss" in l).at(-1)?.step).toBe(2);
    expect((await metricsLog(ws.path("out"))).filter((l) => "loss" in l).map((l) => l.step)).toEqual([1, 2]);
    // --resume auto now continues the new run, not the earlier one.
    const resumed = expectSuccess(await train("--resume", "auto", "--max-steps", "3"), "resuming the new run");
    expect(resumed.stderr).toContain("resumed from out/step_2.safetensors at step 2");
  });

  it("--overwrite beside --resume is refused", async () => {
    const r = await train("--resume", "auto", "--overwrite");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("--overwrite starts a new run, but --resume continues the one in the output folder");
  });
});

describe("--resume with another model", () => {
  it("refuses a config of fewer layers than the checkpoint, naming the tensors and model.num_layers", async () => {
    await ws.writeConfig("deep.yaml", { model: { ...TINY_MODEL, num_layers: 3 }, trainer: { max_steps: 2, save_interval: 2 } });
    await ws.writeConfig("shallow.yaml", { model: { ...TINY_MODEL, num_layers: 2 }, trainer: { max_steps: 4, save_interval: 2 } });
    expectSuccess(await ws.run(["train", "-f", "deep.yaml", "-d", "data.bin", "--output-dir", "deep", "--headless"]), "the 3-layer run");
    const before = await snapshotTree(ws.path("deep"));
    const r = await ws.run(["train", "-f", "shallow.yaml", "-d", "data.bin", "--output-dir", "deep", "--headless", "--resume", "auto"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/CheckpointError in deep\/step_2\.safetensors: the checkpoint does not match the model: \d+ tensors of the checkpoint the model does not have \(transformer\.h\.2\./);
    expect(r.stderr).toContain("the checkpoint's model has model.num_layers 3 (this run: 2)");
    expect(r.stdout).not.toContain('"loss"');
    expect(await snapshotTree(ws.path("deep"))).toEqual(before);
  });
});

describe("--resume auto with a damaged newest checkpoint", () => {
  it("names it, renames it .damaged and resumes bit-exactly from the newest good one", async () => {
    expectSuccess(await train(), "the run to step 6");
    const straight = await readCheckpoint(ws.path("out", "step_6.safetensors"));
    const newest = ws.path("out", "step_6.safetensors");
    await truncate(newest, (await stat(newest)).size - 100);
    const r = expectSuccess(await train("--resume", "auto"), "resuming past the damaged checkpoint");
    expect(r.stderr).toMatch(/warning: out\/step_6\.safetensors is damaged \(.*truncated.*\); renamed it out\/step_6\.safetensors\.damaged; resuming from an earlier checkpoint/);
    expect(r.stderr).toContain("resumed from out/step_4.safetensors at step 4");
    expect(existsSync(ws.path("out", "step_6.safetensors.damaged"))).toBe(true);
    // Steps 5 and 6 again, from step 4's checkpoint: the same bits as the first time.
    expect(differingTensors(straight, await readCheckpoint(ws.path("out", "step_6.safetensors")))).toEqual([]);
  });
});
