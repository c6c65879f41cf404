import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// A limit on the command line wins over the file's; with max_steps and num_epochs both set
// the run ends at whichever comes first; the banner says how many steps and which limit decides.
let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("limits");
  await ws.writeConfig("long.yaml", { trainer: { max_steps: 2400, log_interval: 1 } });
  await ws.writeConfig("both.yaml", { trainer: { max_steps: 3, num_epochs: 1, log_interval: 1 } });
  await ws.writeTokens("data.bin", textTokens(600));
});
afterAll(() => ws.remove());

const steps = (stdout: string) => jsonLines(stdout).filter((l) => "loss" in l);
const bannerSteps = (stderr: string) => /^ {2}steps +(.*)$/m.exec(stderr)?.[1];

describe("step limits", () => {
  it("--num-epochs 1 beside the file's max_steps trains one epoch and says the file's limit was set aside", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "long.yaml", "-d", "data.bin", "--output-dir", "epochs", "--headless", "--num-epochs", "1"]), "--num-epochs 1");
    const banner = bannerSteps(r.stderr);
    const m = /^(\d+) \(--num-epochs 1: 1 epoch of (\d+) steps; the config's trainer\.max_steps 2400 set aside by the flag\)$/.exec(banner ?? "");
    expect(m, banner).not.toBeNull();
    const total = Number(m![1]);
    expect(total).toBe(Number(m![2]));
    expect(total).toBeLessThan(2400);
    const lines = steps(r.stdout);
    expect(lines.at(-1)!.step).toBe(total);
    expect(lines.at(-1)!.epoch as number).toBeLessThanOrEqual(1);
    expect(lines.at(-1)!.epoch as number).toBeGreaterThan(0.9);
  });

  it("with max_steps and num_epochs in the file, stops at whichever comes first", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "both.yaml", "-d", "data.bin", "--output-dir", "both", "--headless"]), "both limits");
    expect(bannerSteps(r.stderr)).toMatch(/^3 \(trainer\.max_steps in both\.yaml; before trainer\.num_epochs in both\.yaml \(1 epoch of \d+ steps\)\)$/);
    expect(steps(r.stdout).at(-1)!.step).toBe(3);
  });

  it("--max-steps beside the file's max_steps: the flag's count", async () => {
    const r = expectSuccess(await ws.run(["train", "-f", "long.yaml", "-d", "data.bin", "--output-dir", "flag", "--headless", "--max-steps", "2"]), "--max-steps 2");
    expect(bannerSteps(r.stderr)).toBe("2 (--max-steps 2)");
    expect(steps(r.stdout).at(-1)!.step).toBe(2);
  });
});
