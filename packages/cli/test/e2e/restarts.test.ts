import { readFile, readdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { differingTensors, metricsLog, readCheckpoint } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// --max-restarts: kiln's launcher starts every rank again, from the newest checkpoint, after
// one fails; resume is bit-exact, so the run ends where an uninterrupted one ends.

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("restarts");
  await ws.writeConfig("run.yaml", { trainer: { max_steps: 400, save_interval: 50, eval_interval: 1000 } });
  await ws.writeTokens("data.bin", textTokens(8000));
});
afterAll(() => ws.remove());

const TRAIN = ["train", "-f", "run.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--threads", "1", "--ranks", "2", "--sync-backend", "cpu", "--sync-timeout", "3"];

/** The process of rank `rank` among the children of `parent`, by the RANK its launcher gave it. */
async function rankProcess(parent: number, rank: number): Promise<number | undefined> {
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== parent) continue;
      const env = (await readFile(`/proc/${entry}/environ`, "utf8")).split("\0");
      if (env.includes(`RANK=${rank}`)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

describe("--max-restarts", () => {
  it("starts every rank again from the newest checkpoint when one is killed, and ends with an uninterrupted run's weights", async () => {
    expectSuccess(await ws.run([...TRAIN, "--output-dir", "straight"]), "uninterrupted run");
    const run = ws.start([...TRAIN, "--max-restarts", "1", "--output-dir", "restarted"]);
    while (jsonLines(run.stdout).filter((l) => typeof l.loss === "number").length < 120) {
      if (run.child.exitCode !== null) throw new Error(`the run stopped early:\n${run.stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const victim = await rankProcess(run.child.pid!, 1);
    expect(victim).toBeDefined();
    process.kill(victim!, "SIGKILL");
    const r = await run.exited;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/rank 1 was killed by SIGKILL; the other ranks stop too/);
    expect(r.stderr).toMatch(/restart 1 of 1: every rank starts again from the newest checkpoint in restarted \(--resume auto\)/);
    // Each step once in the metrics log, the steps trained again after the restart in place of the lost ones.
    const steps = (await metricsLog(ws.path("restarted"))).flatMap((l) => (typeof l.loss === "number" ? [l.step as number] : []));
    expect(steps).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    const [a, b] = await Promise.all([readCheckpoint(ws.path("straight", "final.safetensors")), readCheckpoint(ws.path("restarted", "final.safetensors"))]);
    expect(differingTensors(a, b)).toEqual([]);
  }, 120_000);

  it("says it has no effect on a run kiln's launcher does not start", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "run.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--max-steps", "2", "--max-restarts", "2", "--output-dir", "one"]), "one rank");
    expect(r.stderr).toMatch(/warning: --max-restarts has no effect here: kiln's launcher restarts the ranks it starts \(--ranks, --gpus, --nnodes\)\n/);
  });

  it("gives up after the restarts it was allowed, with the failing rank's code", async () => {
    const run = ws.start([...TRAIN, "--output-dir", "given-up"]);
    while (jsonLines(run.stdout).filter((l) => typeof l.loss === "number").length < 3) {
      if (run.child.exitCode !== null) throw new Error(`the run stopped early:\n${run.stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    process.kill((await rankProcess(run.child.pid!, 1))!, "SIGKILL");
    const r = await run.exited;
    expect(r.code).toBe(137);
    expect(r.stderr).not.toMatch(/restart 1/);
  }, 60_000);
});
