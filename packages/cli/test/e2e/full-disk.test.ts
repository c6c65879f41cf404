import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statfsSync, writeSync, openSync, closeSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stepCheckpoints } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { records } from "./support/tfevents-reader.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A disk that fills during a run leaves nothing partial: the metrics log holds whole lines,
// the TensorBoard files whole records, no temp files stay, and a run that had saved nothing
// leaves nothing at all, so that the same command runs again once there is space.
let ws: Workspace;
let disk: string;
let mounted = false;
let why = "";
beforeAll(async () => {
  ws = await Workspace.create("full-disk");
  await ws.writeConfig("run.yaml", { trainer: { max_steps: 100_000, save_interval: 5, max_checkpoints: 1, log_interval: 1 } });
  await ws.writeTokens("data.bin", textTokens(3000));
  disk = ws.path("disk");
  mkdirSync(disk);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", disk], { stdio: "pipe" });
    mounted = true;
  } catch (err) {
    why = (err as Error).message.split("\n")[0];
  }
});
afterAll(async () => {
  if (mounted) execFileSync("umount", [disk]);
  await ws.remove();
});

const resize = (size: string) => execFileSync("mount", ["-o", `remount,size=${size}`, disk]);
const TRAIN = (out: string) => ["train", "-f", "run.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--output-dir", out];

/** Fills the disk to its last byte with one file. */
function fill(file: string): void {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(4096);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}

function expectWholeLogs(out: string): number[] {
  const text = readFileSync(`${out}/metrics.jsonl`, "utf8");
  expect(text.endsWith("\n")).toBe(true);
  const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l) as { step: number; loss?: number });
  const steps = lines.filter((l) => l.loss !== undefined).map((l) => l.step);
  for (const f of readdirSync(`${out}/tensorboard`)) expect(() => records(readFileSync(`${out}/tensorboard/${f}`)), f).not.toThrow();
  expect(readdirSync(out).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  return steps;
}

describe.skipIf(process.getuid?.() !== 0)("a full disk (a small tmpfs; needs root to mount it)", () => {
  it("before the first checkpoint: the run stops naming the disk and leaves nothing; with space the same command runs", async (ctx) => {
    if (!mounted) ctx.skip(`tmpfs could not be mounted: ${why}`);
    // 64 KiB holds log lines but not the tiny model's checkpoint (AdamW state and all).
    resize("64k");
    const out = `${disk}/first`;
    const r = await ws.run([...TRAIN(out), "--max-steps", "5"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/cannot write checkpoint file: disk full/);
    expect(r.stderr).toContain("removed this run's metrics.jsonl and TensorBoard file");
    expect(existsSync(out) ? readdirSync(out) : []).toEqual([]);
    resize("1m");
    expectSuccess(await ws.run([...TRAIN(out), "--max-steps", "5"]), "the same command with space");
    rmSync(out, { recursive: true });
  });

  it("after a checkpoint: whole lines and records, the checkpoint kept, and --resume auto goes on from it", async (ctx) => {
    if (!mounted) ctx.skip(`tmpfs could not be mounted: ${why}`);
    resize("1m");
    const out = `${disk}/later`;
    const p = ws.start(TRAIN(out));
    await p.until(() => p.stderr.includes(`saved ${out}/step_5.safetensors`), "the checkpoint of step 5");
    const filler = `${disk}/filler`;
    fill(filler);
    const r = await p.exited;
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/disk full/);
    expect(statfsSync(disk).bavail).toBeLessThan(2);
    const steps = expectWholeLogs(out);
    expect(steps.length).toBeGreaterThanOrEqual(5);
    const kept = await stepCheckpoints(out);
    expect(kept.length).toBe(1);
    rmSync(filler);
    const resumed = expectSuccess(await ws.run([...TRAIN(out), "--resume", "auto", "--max-steps", String(kept[0].step + 2)]), "resuming with space again");
    expect(resumed.stderr).toContain(`at step ${kept[0].step}`);
    // No step twice: the lines past the checkpoint were dropped before the resumed run logged again.
    const after = expectWholeLogs(out);
    expect(after).toEqual(Array.from({ length: kept[0].step + 2 }, (_, i) => i + 1));
  });
});
