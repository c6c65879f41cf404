import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaStatus } from "@kiln/kernels-cuda";
import { MODELS_DIR } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// nano-start trained 20 steps on the CUDA kernels (compiled for this CPU by the
// simulator) against the same run on the wasm backend: the same losses.
const sim = cudaStatus().simulator;
const STEPS = 20;

describe.skipIf(!sim.built)(`kiln train on the CUDA kernels (cuda-sim)${sim.built ? "" : ` (skipped: ${sim.detail})`}`, () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await Workspace.create("cuda-sim");
    const nano = parse(await readFile(path.join(MODELS_DIR, "nano-start.yaml"), "utf8")) as { model: object; trainer: object };
    const trainer = { ...nano.trainer, max_steps: STEPS, log_interval: 1, eval_interval: 1000, save_interval: 1000 };
    await ws.write("nano-start.yaml", JSON.stringify({ model: nano.model, trainer }));
    await ws.writeTokens("data.bin", textTokens(40_000));
  });
  afterAll(() => ws?.remove());

  const losses = async (backend: string) => {
    const r = expectSuccess(
      await ws.run(["train", "-f", "nano-start.yaml", "-d", "data.bin", "--output-dir", `out-${backend}`, "--headless"], { env: { KILN_BACKEND: backend } }),
      `training nano-start on ${backend}`,
    );
    return { stderr: r.stderr, losses: r.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { step: number; loss?: number }).filter((l) => l.loss !== undefined) };
  };

  it(`matches the wasm backend's losses to 1e-4 over ${STEPS} steps`, async () => {
    const sim = await losses("cuda-sim");
    const wasm = await losses("cpu");
    expect(sim.stderr).toMatch(/device\s+cuda-sim/);
    expect(sim.losses.map((l) => l.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    expect(wasm.losses.length).toBe(STEPS);
    const worst = Math.max(...sim.losses.map((l, i) => Math.abs(l.loss! - wasm.losses[i].loss!)));
    expect(worst, `sim ${sim.losses.map((l) => l.loss).join(", ")}\nwasm ${wasm.losses.map((l) => l.loss).join(", ")}`).toBeLessThan(1e-4);
    expect(sim.losses[STEPS - 1].loss!).toBeLessThan(sim.losses[0].loss! - 0.5);
  }, 600_000);
});
