import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, readdir, writeFile, mkdir } from "node:fs/promises";
import { hostname } from "node:os";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectRefused } from "./support/expectations.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// One run per output folder: <output>/kiln.lock names the run that holds it.
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("lock");
  await ws.writeConfig("long.yaml", { trainer: { max_steps: 100_000, save_interval: 100_000, log_interval: 1 } });
  await ws.writeConfig("short.yaml", { trainer: { max_steps: 3, save_interval: 3, log_interval: 1 } });
  await ws.writeTokens("data.bin", textTokens(2000));
});
afterEach(() => ws.remove());

/** The id of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.on("exit", resolve));
  return child.pid!;
}

describe("two runs into one output folder", () => {
  it("refuses the second while the first trains, naming the first, and leaves the first's files alone", async () => {
    const first = ws.start(["train", "-f", "long.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]);
    await first.until(() => first.stdoutLines.length >= 1, "the first run's first logged step");
    const lock = JSON.parse(await readFile(ws.path("out", "kiln.lock"), "utf8")) as { pid: number; hostname: string; command: string };
    expect(lock).toMatchObject({ pid: first.pid, hostname: hostname() });
    expect(lock.command).toBe("kiln train -f long.yaml -d data.bin --output-dir out --headless");

    const second = await ws.run(["train", "-f", "short.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]);
    expectRefused(second, {
      kind: "CheckpointError",
      where: "out",
      message: new RegExp(`^another kiln run is training into this folder \\(process ${first.pid}, started \\S+: kiln train -f long\\.yaml -d data\\.bin --output-dir out --headless\\)`),
      hint: new RegExp(`wait for it to finish or stop it, or choose another --output-dir; if process ${first.pid} is not a kiln run, delete out/kiln\\.lock`),
    });

    // The first run carries on, alone: its metrics are one unbroken sequence of its own steps.
    const seen = first.stdoutLines.length;
    await first.until(() => first.stdoutLines.length >= seen + 2, "two more steps of the first run");
    first.child.kill("SIGINT");
    const r = await first.exited;
    expect(r.code, r.stderr).toBe(130);
    const steps = jsonLines(await readFile(ws.path("out", "metrics.jsonl"), "utf8"))
      .filter((l) => "loss" in l)
      .map((l) => l.step as number);
    expect(steps).toEqual(steps.map((_, i) => i + 1));
    // The lock goes with the run that held it.
    expect(existsSync(ws.path("out", "kiln.lock"))).toBe(false);
  });

  it("takes over a lock left by a process that died, with a warning", async () => {
    const dead = await deadPid();
    await mkdir(ws.path("out"));
    await writeFile(ws.path("out", "kiln.lock"), JSON.stringify({ pid: dead, hostname: hostname(), started: "2026-01-02T03:04:05.000Z", command: "kiln train -f short.yaml" }));
    const r = expectSuccess(await ws.run(["train", "-f", "short.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]), "training into a stale lock's folder");
    expect(r.stderr).toContain(`warning: taking over out/kiln.lock: it was left by process ${dead}, started 2026-01-02T03:04:05.000Z: kiln train -f short.yaml, which is no longer running`);
    expect(jsonLines(r.stdout).filter((l) => "loss" in l).map((l) => l.step)).toEqual([1, 2, 3]);
    expect((await readdir(ws.path("out"))).sort()).toEqual(["final.safetensors", "metrics.jsonl", "step_3.safetensors", "tensorboard"]);
  });

  it("a refused run into a new folder leaves no folder behind", async () => {
    const r = await ws.run(["train", "-f", "short.yaml", "-d", "missing.bin", "--output-dir", "new-run", "--headless"]);
    expect(r.code).toBe(1);
    expect(existsSync(ws.path("new-run"))).toBe(false);
  });
});
