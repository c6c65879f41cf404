import fs from "node:fs";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import type { KilnProcess } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A process killed outright (SIGKILL) while writing a checkpoint leaves every
// step_*.safetensors whole: checkpoints are written to a temp file and renamed.
// The long position table (max_seq_len 16384) makes each checkpoint about 6 MB,
// so a write takes long enough to be caught in the middle, while a step stays cheap.
const BIG_CHECKPOINT_MODEL = { hidden_size: 32, num_heads: 2, num_layers: 1, max_seq_len: 16384 };
/** The atomic writer's temp files: `.<name>.<pid>.<random hex>.tmp` beside the target. */
const TEMP_STEP_FILE = /^\.step_(\d+)\.safetensors\.\d+\.[0-9a-f]+\.tmp$/;
const ATTEMPTS = 4;

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("kill");
  await ws.writeConfig("big.yaml", { model: BIG_CHECKPOINT_MODEL, trainer: { max_steps: 500, save_interval: 1, log_interval: 1 } });
  await ws.writeTokens("data.bin", textTokens(2000));
});
afterEach(() => ws.remove());

/**
 * Polls `dir` as fast as the event loop allows and SIGKILLs `p` as soon as the
 * checkpoint of step `target` (or a later one) is being written, after step_1 is
 * complete. Returns the temp file's name.
 */
async function killDuringWrite(p: KilnProcess, dir: string, target: number): Promise<string> {
  const deadline = Date.now() + 60_000;
  let sawFirst = false;
  while (Date.now() < deadline) {
    if (p.child.exitCode !== null) throw new Error(`kiln exited ${p.child.exitCode} before it could be killed\n${p.stderr}`);
    const names = await readdir(dir).catch(() => [] as string[]);
    sawFirst ||= names.includes("step_1.safetensors");
    const temp = sawFirst ? names.find((n) => Number(TEMP_STEP_FILE.exec(n)?.[1] ?? 0) >= target) : undefined;
    if (temp !== undefined) {
      process.kill(p.pid, "SIGKILL");
      return temp;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  p.child.kill("SIGKILL");
  throw new Error(`no write of step_${target} or later was seen within 60 s`);
}

describe("kill -9 while a checkpoint is being written", () => {
  it("leaves only complete checkpoints, and --resume auto continues from the newest", async () => {
    let hits = 0;
    for (let attempt = 1; attempt <= ATTEMPTS && hits === 0; attempt++) {
      const out = `out-${attempt}`;
      const p = ws.start(["train", "-f", "big.yaml", "-d", "data.bin", "--output-dir", out, "--headless"]);
      // A different moment each time: with --max-checkpoints 5, from step 7 on older files are pruned too.
      const target = 2 + Math.floor(Math.random() * 7);
      const temp = await killDuringWrite(p, ws.path(out), target);
      const ended = await p.exited;
      expect(ended.signal).toBe("SIGKILL");
      // The kill landed inside the write when the temp file is still there (else the rename won the race).
      const hit = existsSync(ws.path(out, temp));
      if (hit) hits++;

      const checkpoints = await stepCheckpoints(ws.path(out));
      expect(checkpoints.length, `killed while writing ${temp}`).toBeGreaterThan(0);
      for (const c of checkpoints) {
        const contents = await readCheckpoint(c.file);
        expect(contents.metadata["kiln.step"]).toBe(String(c.step));
        expect(contents.tensors.size).toBeGreaterThan(0);
      }

      const newest = checkpoints.at(-1)!.step;
      if (hit) expect(newest).toBe(Number(TEMP_STEP_FILE.exec(temp)![1]) - 1);
      const resumed = expectSuccess(
        await ws.run(["train", "-f", "big.yaml", "-d", "data.bin", "--output-dir", out, "--headless", "--resume", "auto", "--max-steps", String(newest + 1)]),
        "resuming after the kill",
      );
      expect(resumed.stderr).toContain(`resumed from ${out}/step_${newest}.safetensors at step ${newest}`);
      expect(resumed.stdout).toContain(`"step":${newest + 1},`);
      // The dead writer's temp file is cleaned up, and metrics.jsonl keeps each step once.
      expect(fs.readdirSync(ws.path(out)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
      const steps = fs
        .readFileSync(ws.path(out, "metrics.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { step: number; loss?: number })
        .filter((l) => l.loss !== undefined)
        .map((l) => l.step);
      expect(new Set(steps).size).toBe(steps.length);
      await readCheckpoint(ws.path(out, `step_${newest + 1}.safetensors`));
    }
    expect(hits, `none of ${ATTEMPTS} kills landed inside a checkpoint write`).toBeGreaterThan(0);
  });
});
