import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { maxAbsDiff, readCheckpoint } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { NetworkHosts, hostsUnavailable } from "./support/network-hosts.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// torchrun itself (pip's torch 2.x, installed here into a virtual environment kept between
// runs) launching kiln unchanged on two hosts (network namespaces, support/network-hosts.ts):
// its static form and its c10d rendezvous. torchrun's store holds MASTER_PORT; kiln's rank 0
// takes the next port. The run must equal one rank with the whole global batch.

/** A virtual environment with pip's torch, made once per machine (pip install torch, as a user would). */
const VENV = path.join(os.tmpdir(), "kiln-test-torchrun-venv");
const TORCHRUN = path.join(VENV, "bin", "torchrun");

/** Why torchrun cannot run here, or undefined once it can. */
function torchrunUnavailable(): string | undefined {
  const hosts = hostsUnavailable();
  if (hosts) return hosts;
  if (existsSync(TORCHRUN)) return undefined;
  try {
    execFileSync("python3", ["-m", "venv", VENV], { stdio: "pipe" });
    execFileSync(path.join(VENV, "bin", "pip"), ["install", "-q", "--retries", "0", "--timeout", "10", "torch"], { stdio: "pipe", timeout: 600_000 });
    return existsSync(TORCHRUN) ? undefined : "pip install torch gave no torchrun";
  } catch (err) {
    return `pip's torch cannot be installed here (${(err as Error).message.split("\n")[0]})`;
  }
}

let unavailable: string | undefined;
let ws: Workspace;
let net: NetworkHosts | undefined;
beforeAll(async () => {
  unavailable = torchrunUnavailable();
  ws = await Workspace.create("torchrun-hosts");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 4, save_interval: 1000, eval_interval: 2, eval_iters: 2 } });
  await ws.writeTokens("data.bin", textTokens(6000));
  if (unavailable === undefined) net = NetworkHosts.create(2, "tr");
}, 900_000);
afterAll(async () => {
  net?.remove();
  await ws.remove();
});

const TRAIN = ["train", "-f", "tiny.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--threads", "1", "--batch-size", "2"];

describe("torchrun launching kiln on two hosts", () => {
  it.each([
    ["static", ["--master_port", "29400"]],
    ["c10d", ["--rdzv_backend", "c10d", "--rdzv_endpoint", "HOST:29410"]],
  ] as const)("%s: trains as one rank with the whole batch, rank 0 past the port torchrun's store holds", async (form, launch, ctx) => {
    if (unavailable !== undefined) ctx.skip(unavailable);
    const hosts = net!;
    const master = hosts.hosts[0];
    const out = `torchrun-${form}`;
    const runs = await Promise.all(
      [0, 1].map((r) => {
        const torchrun = [TORCHRUN, "--nnodes", "2", "--node_rank", String(r), "--nproc_per_node", "1", "--master_addr", master.address, ...launch.map((w) => w.replace("HOST", master.name)), "--no_python"];
        return ws.run([...TRAIN, "--output-dir", out], { prefix: [...hosts.prefix(r), ...torchrun] });
      }),
    );
    runs.forEach((r, i) => expectSuccess(r, `torchrun node ${i}`));
    const port = form === "static" ? 29401 : undefined;
    // Rank 0 is wherever torchrun put it (c10d picks); its banner names the port it listens on.
    const lead = runs.find((r) => /\n {2}ranks {3}2 processes/.test(r.stderr)) ?? runs[0];
    if (port !== undefined) expect(lead.stderr).toMatch(new RegExp(`rank 0 at ${master.address.replace(/\./g, "\\.")}:${port};`));
    const single = expectSuccess(await ws.run([...TRAIN, "--batch-size", "4", "--output-dir", `one-${form}`]), "1 rank x batch 4");
    const [a, b] = [jsonLines(lead.stdout).filter((l) => typeof l.loss === "number"), jsonLines(single.stdout).filter((l) => typeof l.loss === "number")];
    expect(a.length).toBe(4);
    for (const [i, l] of a.entries()) expect(Math.abs((l.loss as number) - (b[i].loss as number)) / (b[i].loss as number)).toBeLessThan(2e-6);
    const [x, y] = await Promise.all([readCheckpoint(ws.path(out, "final.safetensors")), readCheckpoint(ws.path(`one-${form}`, "final.safetensors"))]);
    for (const [name, bytes] of y.tensors) expect(maxAbsDiff(x.tensors.get(name)!, bytes), name).toBeLessThan(1e-6);
  }, 180_000);
});
