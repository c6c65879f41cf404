import { cp } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { glooStatus } from "@kiln/distributed";
import { maxAbsDiff, readCheckpoint } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// --shard-optimizer (ZeRO stage 1) on the CPU: ranks with the optimizer state split between
// them against the same ranks unsharded, on the same global batches.
let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("shard-optimizer");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 4, save_interval: 2, eval_interval: 2, eval_iters: 2 } });
  await ws.writeTokens("data.bin", textTokens(4000));
});
afterAll(() => ws.remove());

const TRAIN = ["train", "-f", "tiny.yaml", "-d", "data.bin", "--headless", "--target-device", "cpu", "--threads", "1"];
const training = (stdout: string) => jsonLines(stdout).filter((l) => "loss" in l || "val_loss" in l);

function expectSameCurve(a: Record<string, unknown>[], b: Record<string, unknown>[]): void {
  expect(a.map((l) => l.step)).toEqual(b.map((l) => l.step));
  for (const [i, l] of a.entries()) {
    for (const key of ["loss", "grad_norm", "val_loss"] as const) {
      if (l[key] === undefined) continue;
      expect(Math.abs((l[key] as number) - (b[i][key] as number)) / (b[i][key] as number), `${key} at step ${l.step}`).toBeLessThan(2e-6);
    }
  }
}

async function expectSameTensors(fileA: string, fileB: string, tolerance: number): Promise<void> {
  const [a, b] = await Promise.all([readCheckpoint(fileA), readCheckpoint(fileB)]);
  expect([...a.tensors.keys()].sort()).toEqual([...b.tensors.keys()].sort());
  for (const [name, bytes] of b.tensors) expect(maxAbsDiff(a.tensors.get(name)!, bytes), name).toBeLessThan(tolerance);
}

describe.each([
  ["cpu", 3, true],
  ["gloo", 2, glooStatus().available],
] as const)("kiln train --ranks %s --shard-optimizer", (sync, ranks, available) => {
  const run = (dir: string, ...more: string[]) => ws.run([...TRAIN, "--ranks", String(ranks), "--sync-backend", sync, "--batch-size", "2", "--output-dir", dir, ...more]);
  let sharded: Awaited<ReturnType<Workspace["run"]>>;
  let plain: Awaited<ReturnType<Workspace["run"]>>;
  beforeAll(async () => {
    if (!available) return;
    sharded = expectSuccess(await run(`sharded-${sync}`, "--shard-optimizer"), "sharded");
    plain = expectSuccess(await run(`plain-${sync}`), "unsharded");
  });

  it.runIf(available)("trains like the unsharded ranks: loss curve, final weights and whole checkpoints (m and v gathered)", async () => {
    expect(sharded.stderr).toMatch(new RegExp(`optimizer state sharded over the ${ranks} ranks \\(ZeRO stage 1: gradients reduce-scattered, parameters all-gathered\\)`));
    expectSameCurve(training(sharded.stdout), training(plain.stdout));
    await expectSameTensors(ws.path(`sharded-${sync}`, "final.safetensors"), ws.path(`plain-${sync}`, "final.safetensors"), 1e-6);
    await expectSameTensors(ws.path(`sharded-${sync}`, "step_4.safetensors"), ws.path(`plain-${sync}`, "step_4.safetensors"), 1e-6);
    // The banner's memory plan is one rank's: its share of AdamW's state.
    const units: Record<string, number> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };
    const optimizer = (text: string) => {
      const [, n, unit] = /AdamW ([\d.]+) (B|KiB|MiB|GiB)/.exec(text) ?? [];
      return Number(n) * units[unit];
    };
    expect(optimizer(plain.stderr)).toBeGreaterThan(0);
    expect(optimizer(sharded.stderr)).toBeLessThan(optimizer(plain.stderr) / ranks + 1024);
  });

  it.runIf(available)("resumes a sharded checkpoint sharded or not, and an unsharded one sharded, all alike", async () => {
    const more = ["--resume", "auto", "--max-steps", "6"];
    const a = expectSuccess(await run(`sharded-${sync}`, "--shard-optimizer", ...more), "sharded from sharded");
    const b = expectSuccess(await run(`plain-${sync}`, "--shard-optimizer", ...more), "sharded from unsharded");
    expectSameCurve(training(a.stdout), training(b.stdout));
    expect(training(a.stdout).map((l) => l.step)).toEqual([5, 6, 6]);
    await expectSameTensors(ws.path(`sharded-${sync}`, "step_6.safetensors"), ws.path(`plain-${sync}`, "step_6.safetensors"), 1e-6);
  });
});

describe("kiln train --shard-optimizer, other cases", () => {
  it("bf16: the f32 masters sharded, the final weights exported in f32 from them", async () => {
    const args = (dir: string, ...more: string[]) => [...TRAIN, "--ranks", "2", "--batch-size", "2", "--dtype", "bf16", "--export-dtype", "f32", "--output-dir", dir, ...more];
    const sharded = expectSuccess(await ws.run(args("bf16-sharded", "--shard-optimizer")), "bf16 sharded");
    const plain = expectSuccess(await ws.run(args("bf16-plain")), "bf16 unsharded");
    expectSameCurve(training(sharded.stdout), training(plain.stdout));
    await expectSameTensors(ws.path("bf16-sharded", "final.safetensors"), ws.path("bf16-plain", "final.safetensors"), 1e-6);
  });

  it("resumes with another number of ranks over the same global batch rows (3 x 2 as 2 x 3), the sharded state split anew", async () => {
    const start = [...TRAIN, "--sync-backend", "cpu", "--shard-optimizer"];
    expectSuccess(await ws.run([...start, "--ranks", "3", "--batch-size", "2", "--output-dir", "three"]), "3 ranks");
    await cp(ws.path("three"), ws.path("three-copy"), { recursive: true });
    const more = ["--resume", "auto", "--max-steps", "6"];
    const two = expectSuccess(await ws.run([...start, "--ranks", "2", "--batch-size", "3", "--output-dir", "three", ...more]), "2 ranks from 3");
    const same = expectSuccess(await ws.run([...TRAIN, "--ranks", "3", "--batch-size", "2", "--output-dir", "three-copy", ...more]), "3 ranks unsharded from 3");
    expect(training(two.stdout).map((l) => l.step)).toEqual([5, 6, 6]);
    expectSameCurve(training(two.stdout), training(same.stdout));
    await expectSameTensors(ws.path("three", "step_6.safetensors"), ws.path("three-copy", "step_6.safetensors"), 1e-6);
    // step_6 is the 2 ranks' now: 3 ranks at batch 3 would train 9 rows a global batch, not 6.
    const refused = await ws.run([...start, "--ranks", "3", "--batch-size", "3", "--output-dir", "three", "--resume", "auto", "--max-steps", "8"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/trained by 2 data-parallel ranks, this run has 3/);
    expect(refused.stderr).toMatch(/or with 3 at --batch-size 2 \(6 rows a global batch, as it was\)/);
  });

  it("warns that one rank has nothing to shard", async () => {
    const r = expectSuccess(await ws.run([...TRAIN, "--max-steps", "1", "--shard-optimizer", "--output-dir", "one-rank"]), "one rank");
    expect(r.stderr).toMatch(/warning: trainer\.shard_optimizer \(--shard-optimizer\) has no effect with one rank/);
  });

  it("kiln estimate --ranks N --shard-optimizer plans one rank's share of the optimizer state", async () => {
    const plain = expectSuccess(await ws.run(["estimate", "-f", "tiny.yaml", "--json"]), "estimate");
    const sharded = expectSuccess(await ws.run(["estimate", "-f", "tiny.yaml", "--ranks", "4", "--shard-optimizer", "--json"]), "estimate sharded");
    const [p, s] = [JSON.parse(plain.stdout), JSON.parse(sharded.stdout)];
    expect(s.memory.optimizerState).toBeLessThan(p.memory.optimizerState / 4 + 8 * 16 * 4);
    expect(p.memory.total - s.memory.total).toBe(p.memory.optimizerState - s.memory.optimizerState);
    const text = expectSuccess(await ws.run(["estimate", "-f", "tiny.yaml", "--ranks", "4", "--shard-optimizer"]), "estimate table");
    expect(text.stdout).toMatch(/optimizer +[\d.]+ KiB \(AdamW m, v in f32\): this rank's share of [\d.]+ KiB, sharded over 4 ranks/);
  });
});
