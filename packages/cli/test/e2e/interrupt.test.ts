import { existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readCheckpoint, stepCheckpoints } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Ctrl-C finishes the step under way, saves it, and exits 130.
let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("sigint");
  await ws.writeConfig("long.yaml", { trainer: { max_steps: 100_000, save_interval: 100_000, log_interval: 1 } });
  await ws.writeTokens("data.bin", textTokens(2000));
});
afterEach(() => ws.remove());

describe("Ctrl-C (SIGINT) during headless training", () => {
  it("exits 130 and leaves a loadable checkpoint of the last finished step", async () => {
    const p = ws.start(["train", "-f", "long.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]);
    await p.until(() => p.stdoutLines.length >= 1, "the first logged step");
    p.child.kill("SIGINT");
    const r = await p.exited;
    expect(r.signal, r.stderr).toBeNull();
    expect(r.code, r.stderr).toBe(130);

    const lastLogged = jsonLines(r.stdout).filter((l) => "loss" in l).at(-1)!.step as number;
    expect(lastLogged).toBeGreaterThanOrEqual(1);
    expect(lastLogged).toBeLessThan(100_000);
    const checkpoints = await stepCheckpoints(ws.path("out"));
    expect(checkpoints.map((c) => c.step)).toEqual([lastLogged]);
    const saved = await readCheckpoint(checkpoints[0].file);
    expect(saved.metadata["kiln.step"]).toBe(String(lastLogged));
    expect(r.stderr).toContain("stopping after this step");
    expect(r.stderr).toContain(`saved out/step_${lastLogged}.safetensors`);
    // An interrupted run writes no final weights.
    expect(existsSync(ws.path("out", "final.safetensors"))).toBe(false);

    // Loadable by the trainer, not only parseable: training resumes from it.
    const resumed = expectSuccess(
      await ws.run(["train", "-f", "long.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--resume", "auto", "--max-steps", String(lastLogged + 1)]),
      "resuming after Ctrl-C",
    );
    expect(resumed.stderr).toContain(`resumed from out/step_${lastLogged}.safetensors at step ${lastLogged}`);
    expect(jsonLines(resumed.stdout).filter((l) => "loss" in l).map((l) => l.step)).toEqual([lastLogged + 1]);
  });
});
