import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { glooStatus } from "@kiln/distributed";
import { maxAbsDiff, readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { type KilnResult, jsonLines } from "./support/kiln-process.js";
import { NetworkHosts, hostsUnavailable } from "./support/network-hosts.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Ranks on separate hosts: network namespaces with their own addresses and host names
// (support/network-hosts.ts), one rank each, launched with --nnodes/--node-rank/--master-addr.
// They must train as one rank with the whole global batch does, through Gloo and through
// kiln's cpu sync (which then goes over TCP: the hosts are other machines).
const unavailable = hostsUnavailable();
const withGloo = glooStatus().available;

let ws: Workspace;
let net: NetworkHosts | undefined;
beforeAll(async () => {
  ws = await Workspace.create("network-hosts");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 4, save_interval: 1000, eval_interval: 2, eval_iters: 2 } });
  await ws.writeTokens("data.bin", textTokens(6000));
  if (unavailable === undefined) net = NetworkHosts.create(3, "nh");
});
afterAll(async () => {
  net?.remove();
  await ws.remove();
});

const TRAIN = ["train", "-f", "tiny.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--threads", "1"];
const PORT = "29500";

/** Ranks 0 .. n-1, one on each of the first n hosts, rank 0's host the master. */
function onHosts(n: number, extra: string[], out: string): Promise<KilnResult[]> {
  const hosts = net!;
  return Promise.all(
    Array.from({ length: n }, (_, r) =>
      ws.run([...TRAIN, "--nnodes", String(n), "--node-rank", String(r), "--master-addr", hosts.hosts[0].address, "--master-port", PORT, "--batch-size", "2", "--output-dir", out, ...extra], {
        prefix: hosts.prefix(r),
      }),
    ),
  );
}

const oneRank = new Map<number, Promise<KilnResult>>();
/** One rank with the global batch of n ranks x 2, on this machine, made once per n. */
const one = (n: number) => {
  if (!oneRank.has(n)) oneRank.set(n, ws.run([...TRAIN, "--batch-size", String(2 * n), "--output-dir", `one-${n}`]).then((r) => expectSuccess(r, `1 rank x batch ${2 * n}`)));
  return oneRank.get(n)!;
};

describe.skipIf(unavailable !== undefined).each([
  [2, "gloo", withGloo],
  [2, "cpu", true],
  [3, "gloo", withGloo],
  [3, "cpu", true],
] as const)("%i hosts x 1 rank, --sync-backend %s", (n, sync, available) => {
  it.runIf(available)("trains as one rank with the whole batch: the same losses and final weights", async () => {
    const out = `hosts-${n}-${sync}`;
    const runs = await onHosts(n, ["--sync-backend", sync], out);
    runs.forEach((r, i) => expectSuccess(r, `rank ${i}`));
    const path = sync === "gloo" ? "Gloo's TCP ring" : "TCP through rank 0 \\(no shared memory: rank 1 runs on another machine than rank 0\\)";
    expect(runs[0].stderr).toMatch(new RegExp(`ranks {3}${n} processes, ${sync} sync \\(--sync-backend\\) through ${path}, rank 0 at ${net!.hosts[0].address.replace(/\./g, "\\.")}:${PORT};`));
    const single = await one(n);
    const [a, b] = [jsonLines(runs[0].stdout), jsonLines(single.stdout)];
    expect(a.map((l) => l.step)).toEqual(b.map((l) => l.step));
    for (const [i, l] of a.entries()) {
      for (const key of ["loss", "val_loss"] as const) if (l[key] !== undefined) expect(Math.abs((l[key] as number) - (b[i][key] as number)) / (b[i][key] as number)).toBeLessThan(2e-6);
    }
    const [x, y] = await Promise.all([readCheckpoint(ws.path(out, "final.safetensors")), readCheckpoint(ws.path(`one-${n}`, "final.safetensors"))]);
    for (const [name, bytes] of y.tensors) expect(maxAbsDiff(x.tensors.get(name)!, bytes), name).toBeLessThan(1e-6);
  });

  it.runIf(available)("with the optimizer state sharded over the hosts (--shard-optimizer): the same final weights", async () => {
    const out = `hosts-${n}-${sync}-sharded`;
    const runs = await onHosts(n, ["--sync-backend", sync, "--shard-optimizer"], out);
    runs.forEach((r, i) => expectSuccess(r, `rank ${i}`));
    expect(runs[0].stderr).toMatch(new RegExp(`optimizer state sharded over the ${n} ranks`));
    await one(n);
    const [x, y] = await Promise.all([readCheckpoint(ws.path(out, "final.safetensors")), readCheckpoint(ws.path(`one-${n}`, "final.safetensors"))]);
    for (const [name, bytes] of y.tensors) expect(maxAbsDiff(x.tensors.get(name)!, bytes), name).toBeLessThan(1e-6);
  });
});

describe.skipIf(unavailable !== undefined)("launched as srun launches (Slurm's variables)", () => {
  it("finds rank 0 at the first host of the step's node list and trains as one rank with the whole batch", async () => {
    const hosts = net!;
    // The hosts' addresses as a Slurm host list: 10.x.0.[1-2].
    const [, prefix] = /^(.*\.)\d+$/.exec(hosts.hosts[0].address)!;
    const runs = await Promise.all(
      [0, 1].map((r) =>
        ws.run([...TRAIN, "--batch-size", "2", "--sync-backend", "cpu", "--output-dir", "slurm"], {
          prefix: hosts.prefix(r),
          env: { SLURM_STEP_ID: "0", SLURM_PROCID: String(r), SLURM_LOCALID: "0", SLURM_STEP_NUM_TASKS: "2", SLURM_STEP_TASKS_PER_NODE: "1(x2)", SLURM_STEP_NODELIST: `${prefix}[1-2]`, MASTER_PORT: "29503" },
        }),
      ),
    );
    runs.forEach((r, i) => expectSuccess(r, `rank ${i}`));
    expect(runs[0].stderr).toMatch(new RegExp(`rank 0 at ${hosts.hosts[0].address.replace(/\./g, "\\.")}:29503`));
    const [x, y] = await Promise.all([readCheckpoint(ws.path("slurm", "final.safetensors")), one(2).then(() => readCheckpoint(ws.path("one-2", "final.safetensors")))]);
    for (const [name, bytes] of y.tensors) expect(maxAbsDiff(x.tensors.get(name)!, bytes), name).toBeLessThan(1e-6);
  });
});

describe.skipIf(unavailable !== undefined)("faults between hosts", () => {
  it("a rank that cannot reach rank 0's address says which address, within --sync-timeout", async () => {
    const started = Date.now();
    const r = await ws.run([...TRAIN, "--nnodes", "2", "--node-rank", "1", "--master-addr", net!.hosts[0].address, "--master-port", "29501", "--sync-timeout", "3", "--output-dir", "alone"], { prefix: net!.prefix(1) });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`rank 1 could not join rank 0 at ${net!.hosts[0].address.replace(/\./g, "\\.")}:29501 within 3\\.0 s`));
    expect(r.stderr).toMatch(/check that rank 0 runs and that MASTER_ADDR and MASTER_PORT point at it/);
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it.each([
    ["SIGSTOP", 1],
    ["SIGKILL", 1],
    ["SIGKILL", 0],
  ] as const)("a rank %s'd mid-run (rank %i) is named, with its host, by the other within the timeout; the newest checkpoint loads", async (signal, victim) => {
    const hosts = net!;
    const out = `signal-${signal}-${victim}`;
    await ws.writeConfig("long.yaml", { trainer: { max_steps: 400, save_interval: 10, eval_interval: 1000 } });
    // Started as torchrun starts ranks (the variables, no launcher process between), so that the signal reaches the rank itself.
    const ranks = [0, 1].map((r) =>
      ws.start(["train", "-f", "long.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--threads", "1", "--sync-backend", "cpu", "--sync-timeout", "3", "--output-dir", out], {
        prefix: hosts.prefix(r),
        env: { WORLD_SIZE: "2", RANK: String(r), MASTER_ADDR: hosts.hosts[0].address, MASTER_PORT: String(29510 + victim + (signal === "SIGSTOP" ? 2 : 0)) },
      }),
    );
    const survivor = 1 - victim;
    while (jsonLines(ranks[0].stdout).length < 25) {
      if (ranks[0].child.exitCode !== null) throw new Error(`rank 0 stopped early:\n${ranks[0].stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const sent = Date.now();
    ranks[victim].child.kill(signal);
    const r = await ranks[survivor].exited;
    const took = (Date.now() - sent) / 1000;
    ranks[victim].child.kill("SIGKILL");
    await ranks[victim].exited;
    expect(r.code, r.stderr).toBe(1);
    const at = hosts.hosts[victim].address.replace(/\./g, "\\.");
    expect(r.stderr).toMatch(new RegExp(`TrainingError in data-parallel rank ${victim} of 2 on ${at}, seen by rank ${survivor}: `));
    expect(took).toBeLessThan(8);
    const steps = await stepCheckpoints(ws.path(out));
    expect(steps.length).toBeGreaterThan(0);
    await readCheckpoint(steps.at(-1)!.file);
  }, 60_000);

  it.each([
    ["cpu", true],
    ["gloo", withGloo],
  ] as const)("a host whose link goes down mid-run (--sync-backend %s) is named, with its address, on the other host within the timeout; --resume auto goes on", async (sync, available) => {
    if (!available) return;
    const hosts = net!;
    const out = `link-${sync}`;
    await ws.writeConfig("long.yaml", { trainer: { max_steps: 400, save_interval: 10, eval_interval: 1000 } });
    const train = ["train", "-f", "long.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--threads", "1", "--sync-backend", sync, "--sync-timeout", "3"];
    const ranks = (extra: string[]) => [0, 1].map((r) => ws.start([...train, "--nnodes", "2", "--node-rank", String(r), "--master-addr", hosts.hosts[0].address, "--master-port", "29502", "--output-dir", out, ...extra], { prefix: hosts.prefix(r) }));
    const running = ranks([]);
    while (jsonLines(running[0].stdout).length < 25) {
      if (running[0].child.exitCode !== null) throw new Error(`rank 0 stopped early:\n${running[0].stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const pulled = Date.now();
    hosts.setLink(1, false);
    const [r0, r1] = await Promise.all(running.map((p) => p.exited));
    const took = (Date.now() - pulled) / 1000;
    hosts.setLink(1, true);
    expect([r0.code, r1.code]).toEqual([1, 1]);
    const at = (i: number) => hosts.hosts[i].address.replace(/\./g, "\\.");
    expect(r0.stderr).toMatch(new RegExp(`TrainingError in data-parallel rank 1 of 2 on ${at(1)}, seen by rank 0: rank 1 did not reach`));
    expect(r1.stderr).toMatch(new RegExp(`TrainingError in data-parallel rank 0 of 2 on ${at(0)}, seen by rank 1: rank 0 did not answer`));
    // Noticed within the timeout (3 s) and its grace periods: Gloo's own 3 s receive, then kiln's roll call.
    expect(took).toBeLessThan(sync === "gloo" ? 15 : 8);
    // The checkpoints written load, and the run goes on from the newest when the link is back.
    const steps = await stepCheckpoints(ws.path(out));
    expect(steps.length).toBeGreaterThan(0);
    const newest = steps.at(-1)!.step;
    await readCheckpoint(steps.at(-1)!.file);
    const resumed = ranks(["--resume", "auto", "--max-steps", String(newest + 4)]);
    const [a, b] = await Promise.all(resumed.map((p) => p.exited));
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    expect(jsonLines(a.stdout).map((l) => l.step)[0]).toBe(newest + 1);
  }, 120_000);
});
