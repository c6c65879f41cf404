import { readFileSync, readdirSync } from "node:fs";
import { copyFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { differingTensors, readCheckpoint } from "./support/checkpoints.js";
import { jsonLines } from "./support/kiln-process.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Oxidizr's own six model configs (oxidizr-models/, as Oxidizr ships them): each estimated
// unchanged, and a shrunk copy of each (small hidden size and vocabulary) trained on the CPU.
// Then Mamba3 from the CLI: resume bit-exact and --recompute with unchanged numbers.
const OXIDIZR = path.join(path.dirname(fileURLToPath(import.meta.url)), "oxidizr-models");
const CONFIGS = readdirSync(OXIDIZR).filter((f) => f.endsWith(".yaml")).sort();

/** The same model at toy size: every key Oxidizr set keeps its meaning, the sizes shrink. */
function shrunk(file: string): Record<string, unknown> {
  const c = parse(readFileSync(path.join(OXIDIZR, file), "utf8")) as { model: Record<string, unknown>; trainer: Record<string, unknown> };
  const m = c.model;
  const small: Record<string, unknown> = { hidden_size: 32, num_heads: 4, vocab_size: 256, max_seq_len: 32, mamba2_num_heads: 4, mamba2_head_dim: 16, mamba2_state_size: 8, mamba2_chunk_size: 8 };
  for (const [k, v] of Object.entries(small)) if (m[k] !== undefined && m[k] !== null) m[k] = v;
  for (const k of ["kv_latent_dim", "q_latent_dim"]) if (typeof m[k] === "number") m[k] = 16;
  if (typeof m.d_rope === "number") m.d_rope = 4;
  if (typeof m.intermediate_size === "number") m.intermediate_size = 48;
  m.num_layers = Math.min(m.num_layers as number, 4);
  m.mamba_layers = (m.mamba_layers as number[]).filter((i) => i < 4);
  c.trainer = { ...c.trainer, learning_rate: 0.01, batch_size: 4, seq_len: 32, gradient_accumulation: 1, log_interval: 1 };
  return c;
}

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("mamba3");
  await ws.writeTokens("data.bin", textTokens(6000));
});
afterAll(() => ws.remove());

const steps = (stdout: string) => jsonLines(stdout).filter((l) => typeof l.loss === "number" && typeof l.grad_norm === "number");
const mean = (xs: { loss?: unknown }[]) => xs.reduce((s, l) => s + (l.loss as number), 0) / xs.length;

describe("Oxidizr's model configs", () => {
  it("lists the six", () => {
    expect(CONFIGS).toEqual(["nano-start.yaml", "nano.yaml", "nano_mamba2.yaml", "nano_mamba3.yaml", "nano_mamba3_hybrid.yaml", "nano_mamba3_mimo.yaml"]);
  });

  for (const file of CONFIGS) {
    it(`${file} as shipped: kiln estimate plans it and names its layers`, async () => {
      const r = expectSuccess(await ws.run(["estimate", "-f", path.join(OXIDIZR, file), "--device", "h100"]), `kiln estimate ${file}`);
      const kind = file.includes("mamba3_mimo") ? "Mamba3 MIMO rank 4 with complex RoPE" : file.includes("mamba3") ? "Mamba3 SISO with complex RoPE" : "Mamba2";
      expect(r.stdout).toMatch(new RegExp(`layers\\s+\\d, hidden \\d+, ${kind} in \\d of \\d layers \\(48|16 heads of 16`));
      expect(r.stdout).toMatch(/FLOPs\s+\d/);
    });

    it(`${file} shrunk: trains on the CPU with the loss falling`, async () => {
      await ws.write(`small-${file}`, stringify(shrunk(file)));
      const r = expectSuccess(
        await ws.run(["train", "-f", `small-${file}`, "-d", "data.bin", "--target-device", "cpu", "--max-steps", "30", "--output-dir", `out-${file}`, "--headless"]),
        `kiln train ${file}`,
      );
      const s = steps(r.stdout);
      expect(s).toHaveLength(30);
      expect(mean(s.slice(-5))).toBeLessThan(mean(s.slice(0, 5)) - 0.5);
    });
  }
});

describe("Mamba3 layers from the CLI", () => {
  it("a Mamba3 + latent attention + experts model resumes bit-exactly, and --recompute changes no number", async () => {
    await ws.write("hybrid.yaml", stringify({ ...shrunk("nano_mamba3_hybrid.yaml"), trainer: { ...shrunk("nano_mamba3_hybrid.yaml").trainer, save_interval: 10 } }));
    const args = ["train", "-f", "hybrid.yaml", "-d", "data.bin", "--target-device", "cpu", "--max-steps", "20", "--headless"];
    const r = expectSuccess(await ws.run([...args, "--output-dir", "h1"]), "kiln train");
    expect(r.stderr).toMatch(/Mamba3 SISO with complex RoPE in 3 of 4 layers \(4 heads of 16, state 8, chunks of 8\), latent attention \(kv 16, q 16, rope 4\), 4 experts \(top 2\)/);
    const first = steps(r.stdout).map((l) => l.loss);
    expect(first).toHaveLength(20);
    const straight = await readCheckpoint(ws.path("h1", "step_20.safetensors"));
    // Resumed into another folder from the straight run's step 10: the same losses, and the
    // same bytes for every tensor at step 20 (weights and AdamW state).
    await mkdir(ws.path("h3"));
    await copyFile(ws.path("h1", "step_10.safetensors"), ws.path("h3", "middle.safetensors"));
    const resumed = expectSuccess(await ws.run([...args, "--output-dir", "h3", "--resume", "h3/middle.safetensors"]), "resume");
    expect(steps(resumed.stdout).map((l) => l.loss)).toEqual(first.slice(10));
    expect(differingTensors(straight, await readCheckpoint(ws.path("h3", "step_20.safetensors")))).toEqual([]);
    // Every block recomputed in the backward: the same bytes again.
    const recomputed = expectSuccess(await ws.run([...args, "--output-dir", "h2", "--recompute", "blocks"]), "--recompute blocks");
    expect(recomputed.stderr).toMatch(/recompute: blocks/);
    expect(steps(recomputed.stdout).map((l) => l.loss)).toEqual(first);
    expect(differingTensors(straight, await readCheckpoint(ws.path("h2", "step_20.safetensors")))).toEqual([]);
  });
});
