import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cp } from "node:fs/promises";
import { freePort, glooStatus } from "@kiln/distributed";
import { maxAbsDiff, readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Data parallel on the CPU: 2 ranks x batch 2 against 1 rank x batch 4 on the same global
// batches (the same windows in the same order), and what happens when a rank dies.
let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("data-parallel");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 4, save_interval: 2, eval_interval: 2, eval_iters: 2 } });
  await ws.writeTokens("data.bin", textTokens(4000));
});
afterAll(() => ws.remove());

const TRAIN = ["train", "-f", "tiny.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu"];
const training = (stdout: string) => jsonLines(stdout).filter((l) => "loss" in l || "val_loss" in l);

// The one-rank run every data-parallel run is compared with, made once.
let oneRank: Promise<Awaited<ReturnType<Workspace["run"]>>> | undefined;
const one = () => (oneRank ??= ws.run([...TRAIN, "--batch-size", "4", "--threads", "1", "--output-dir", "one"]).then((r) => expectSuccess(r, "1 rank")));
const withGloo = glooStatus().available;

describe.each([
  ["gloo", withGloo],
  ["cpu", true],
] as const)("kiln train --ranks 2 --sync-backend %s", (sync, available) => {
  let two: Awaited<ReturnType<Workspace["run"]>>;
  const dir = `two-${sync}`;
  beforeAll(async () => {
    if (!available) return;
    two = expectSuccess(await ws.run([...TRAIN, "--ranks", "2", "--sync-backend", sync, "--batch-size", "2", "--output-dir", dir]), "2 ranks");
  });

  it.runIf(available)("logs the loss curve, grad norms and validation losses of one rank with the whole global batch", async () => {
    const [a, b] = [training(two.stdout), training((await one()).stdout)];
    expect(a.map((l) => l.step)).toEqual([1, 2, 2, 3, 4, 4]);
    expect(a.map((l) => l.step)).toEqual(b.map((l) => l.step));
    for (const [i, l] of a.entries()) {
      for (const key of ["loss", "grad_norm", "val_loss", "learning_rate"] as const) {
        if (l[key] === undefined) continue;
        // Logged to 6 significant digits; the runs differ by f32 rounding (about 1e-7).
        expect(Math.abs((l[key] as number) - (b[i][key] as number)) / (b[i][key] as number), `${key} at step ${l.step}`).toBeLessThan(2e-6);
      }
    }
    // Rank 0 alone prints: one JSON line per step, the banner once, with the ranks row.
    expect(jsonLines(two.stdout).length).toBe(6);
    expect(two.stderr.match(/^kiln train /gm)).toHaveLength(1);
    const path = sync === "gloo" ? "Gloo's TCP ring" : "shared memory";
    expect(two.stderr).toMatch(
      new RegExp(`^ {2}ranks {3}2 processes, ${sync} sync \\(--sync-backend\\) through ${path}, rank 0 at 127\\.0\\.0\\.1:\\d+; \\d+ threads? each; global batch 2 x 2 x 16 tokens x 1 accumulation = 64 tokens$`, "m"),
    );
  });

  it.runIf(available)("ends with the weights of the one-rank run, and checkpoints that hold every rank's data cursor", async () => {
    await one();
    const [a, b] = await Promise.all([readCheckpoint(ws.path(dir, "final.safetensors")), readCheckpoint(ws.path("one", "final.safetensors"))]);
    for (const [name, bytes] of b.tensors) expect(maxAbsDiff(a.tensors.get(name)!, bytes), name).toBeLessThan(1e-6);
    const step2 = await readCheckpoint(ws.path(dir, "step_2.safetensors"));
    expect(step2.metadata["kiln.world_size"]).toBe("2");
    expect(JSON.parse(step2.metadata["kiln.data_cursors"])).toEqual([{ epoch: 0, index: 8 }, { epoch: 0, index: 8 }]);
    expect((await readCheckpoint(ws.path("one", "step_2.safetensors"))).metadata["kiln.data_cursor"]).toBe(step2.metadata["kiln.data_cursor"]);
  });

  it.runIf(available)("refuses to resume with another number of ranks over other global batches, and resumes with as many", async () => {
    await one();
    const refused = await ws.run([...TRAIN, "--batch-size", "2", "--output-dir", dir, "--resume", "auto", "--max-steps", "6"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(new RegExp(`CheckpointError in ${dir}/step_4\\.safetensors: the checkpoint was trained by 2 data-parallel ranks, this run has 1`));
    expect(refused.stderr).toMatch(/resume with 2 ranks \(--ranks 2\), or with 1 at --batch-size 4 \(4 rows a global batch, as it was\)/);
    const resumed = expectSuccess(await ws.run([...TRAIN, "--ranks", "2", "--sync-backend", sync, "--batch-size", "2", "--output-dir", dir, "--resume", "auto", "--max-steps", "6"]), "resume");
    const more = await resumeOne();
    const [a, b] = [training(resumed.stdout), training(more.stdout)];
    expect(a.map((l) => l.step)).toEqual([5, 6, 6]);
    for (const [i, l] of a.entries()) expect(Math.abs(((l.loss ?? l.val_loss) as number) - ((b[i].loss ?? b[i].val_loss) as number))).toBeLessThan(1e-5);
  });
});

// The one-rank run continued to step 6, made once (in a copy, so that `one` stays at step 4 for the other comparisons).
let oneResumed: Promise<Awaited<ReturnType<Workspace["run"]>>> | undefined;
const resumeOne = () =>
  (oneResumed ??= one().then(async () => {
    await cp(ws.path("one"), ws.path("one-resumed"), { recursive: true });
    return expectSuccess(await ws.run([...TRAIN, "--batch-size", "4", "--threads", "1", "--output-dir", "one-resumed", "--resume", "auto", "--max-steps", "6"]), "resume 1 rank");
  }));

describe("two machines (--nnodes 2 --node-rank R, here both on this one)", () => {
  it("train like one rank with the whole batch", async () => {
    const port = String(await freePort());
    const node = (r: number) => ws.run([...TRAIN, "--nnodes", "2", "--node-rank", String(r), "--master-port", port, "--batch-size", "2", "--output-dir", "nodes"]);
    const [n0, n1] = await Promise.all([node(0), node(1)]);
    expectSuccess(n0, "node 0");
    expectSuccess(n1, "node 1");
    // Across machines the default is Gloo where installed; without it the cpu backend (which finds both "machines" are this one).
    expect(n0.stderr).toMatch(
      withGloo
        ? /ranks {3}2 processes, gloo sync \(default across machines\) through Gloo's TCP ring, rank 0 at 127\.0\.0\.1:\d+/
        : /ranks {3}2 processes, cpu sync \(default across machines without Gloo: .*\) through shared memory/,
    );
    // Node 1's rank prints nothing of the run: rank 0 alone reports.
    expect(jsonLines(n1.stdout)).toEqual([]);
    await one();
    const [a, b] = await Promise.all([readCheckpoint(ws.path("nodes", "final.safetensors")), readCheckpoint(ws.path("one", "final.safetensors"))]);
    for (const [name, bytes] of b.tensors) expect(maxAbsDiff(a.tensors.get(name)!, bytes), name).toBeLessThan(1e-6);
  });

  it("refuses a node rank outside --nnodes", async () => {
    const r = await ws.run([...TRAIN, "--nnodes", "2", "--node-rank", "2", "--output-dir", "bad-node"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/ConfigError in --node-rank: --node-rank 2 is outside 0\.\.1/);
  });
});

describe("ranks started as torchrun does (WORLD_SIZE, RANK, MASTER_PORT)", () => {
  it("stops rank 0 with an error naming rank 1 when rank 1 is killed; every checkpoint loads and --resume auto continues", async () => {
    const port = await freePort();
    const args = [...TRAIN, "--batch-size", "2", "--output-dir", "killed", "--max-steps", "100000", "--save-interval", "5", "--eval-interval", "100000", "--sync-timeout", "20"];
    const env = (rank: number) => ({ env: { WORLD_SIZE: "2", RANK: String(rank), MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port), LOCAL_WORLD_SIZE: "2" } });
    const ranks = [ws.start(args, env(0)), ws.start(args, env(1))];
    await ranks[0].until(() => ranks[0].stdoutLines.length >= 12, "12 steps");
    ranks[1].child.kill("SIGKILL");
    const killedAt = Date.now();
    const r0 = await ranks[0].exited;
    expect(Date.now() - killedAt).toBeLessThan(10_000);
    expect(r0.code).toBe(1);
    expect(r0.stderr).toMatch(/TrainingError in data-parallel rank 1 of 2 on 127.0.0.1, seen by rank 0: rank 1 disconnected: its process exited or was killed/);
    const saved = await stepCheckpoints(ws.path("killed"));
    expect(saved.length).toBeGreaterThan(1);
    for (const c of saved) await readCheckpoint(c.file);
    const last = saved.at(-1)!.step;
    const resumed = expectSuccess(await ws.run([...TRAIN, "--ranks", "2", "--batch-size", "2", "--output-dir", "killed", "--resume", "auto", "--max-steps", String(last + 2)]), "resume after the kill");
    expect(training(resumed.stdout).filter((l) => "loss" in l).map((l) => l.step)).toEqual([last + 1, last + 2]);
  });
});
