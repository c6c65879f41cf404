import { readFile } from "node:fs/promises";
import path from "node:path";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cudaStatus } from "@kiln/kernels-cuda";
import { readCheckpoint } from "./support/checkpoints.js";
import { MODELS_DIR } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// nano-start trained 20 steps on the CUDA kernels (compiled for this CPU by the
// simulator) against the same run on the wasm backend: the same losses. And a small
// Llama with latent attention (query/key heads of 64 + a RoPE slice of 32 = 96, value
// heads of 64) in bf16: its attention runs on the mma.sync kernels at tile width 128,
// and its losses follow the wasm backend's bf16 run within bf16's rounding.
const sim = cudaStatus().simulator;
const STEPS = 20;
const MLA_STEPS = 8;
const GRAPH_STEPS = 4;

/** A bf16 tensor's values (final.safetensors keeps the training dtype). */
const bf16Values = (bytes: Uint8Array) => new Float32Array(Uint32Array.from(new Uint16Array(bytes.slice().buffer), (b) => b << 16).buffer);

describe.skipIf(!sim.built)(`kiln train on the CUDA kernels (cuda-sim)${sim.built ? "" : ` (skipped: ${sim.detail})`}`, () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await Workspace.create("cuda-sim");
    const nano = parse(await readFile(path.join(MODELS_DIR, "nano-start.yaml"), "utf8")) as { model: object; trainer: object };
    const trainer = { ...nano.trainer, max_steps: STEPS, log_interval: 1, eval_interval: 1000, save_interval: 1000 };
    await ws.write("nano-start.yaml", JSON.stringify({ model: nano.model, trainer }));
    await ws.writeTokens("data.bin", textTokens(40_000));
    const mla = {
      model: { arch: "llama", vocab_size: 256, hidden_size: 128, num_layers: 2, num_heads: 2, intermediate_size: 256, max_seq_len: 64, kv_latent_dim: 32, q_latent_dim: 64, d_rope: 32 },
      trainer: { learning_rate: 3e-3, warmup_steps: 2, batch_size: 2, seq_len: 64, max_steps: MLA_STEPS, log_interval: 1, eval_interval: 1000, save_interval: 1000 },
    };
    await ws.write("tiny-mla.yaml", JSON.stringify(mla));
    await ws.write("nano-graphs.yaml", JSON.stringify({ model: nano.model, trainer: { ...trainer, max_steps: GRAPH_STEPS, gradient_accumulation: 2, batch_size: 2, seq_len: 32, eval_iters: 1 } }));
  });
  afterAll(() => ws?.remove());

  const losses = async (backend: string, config = "nano-start.yaml", extra: string[] = []) => {
    const r = expectSuccess(
      await ws.run(["train", "-f", config, "-d", "data.bin", "--output-dir", `out-${backend}-${config}`, "--headless", ...extra], { env: { KILN_BACKEND: backend } }),
      `training ${config} on ${backend}`,
    );
    return { stderr: r.stderr, losses: r.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { step: number; loss?: number }).filter((l) => l.loss !== undefined) };
  };

  it(`matches the wasm backend's losses to 1e-4 over ${STEPS} steps`, async () => {
    const sim = await losses("cuda-sim");
    const wasm = await losses("cpu");
    expect(sim.stderr).toMatch(/device\s+cuda-sim/);
    // The banner's memory counts what the CUDA kernels reserved beside the plan; the wasm kernels take none.
    expect(sim.stderr).toMatch(/memory\s+.*, evaluation [^,]+, kernel scratch \d+(\.\d+)? (B|KiB|MiB)/);
    expect(wasm.stderr).not.toMatch(/kernel scratch/);
    expect(sim.losses.map((l) => l.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    expect(wasm.losses.length).toBe(STEPS);
    const worst = Math.max(...sim.losses.map((l, i) => Math.abs(l.loss! - wasm.losses[i].loss!)));
    expect(worst, `sim ${sim.losses.map((l) => l.loss).join(", ")}\nwasm ${wasm.losses.map((l) => l.loss).join(", ")}`).toBeLessThan(1e-4);
    expect(sim.losses[STEPS - 1].loss!).toBeLessThan(sim.losses[0].loss! - 0.5);
  }, 600_000);

  it("--cuda-graphs: each micro-batch one recorded graph, the same losses bit for bit; without a CUDA backend a warning", async () => {
    const graphed = expectSuccess(
      await ws.run(["train", "-f", "nano-graphs.yaml", "-d", "data.bin", "--output-dir", "out-graphs", "--headless", "--cuda-graphs"], { env: { KILN_BACKEND: "cuda-sim" } }),
      "training with --cuda-graphs on cuda-sim",
    );
    const plain = await losses("cuda-sim", "nano-graphs.yaml");
    expect(graphed.stderr).toMatch(/device\s+cuda-sim.*; each micro-batch one CUDA graph/);
    expect(plain.stderr).not.toMatch(/CUDA graph/);
    const lossesOf = (stdout: string) => stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { loss?: number }).filter((l) => l.loss !== undefined).map((l) => l.loss);
    expect(lossesOf(graphed.stdout)).toHaveLength(GRAPH_STEPS);
    expect(lossesOf(graphed.stdout)).toEqual(plain.losses.map((l) => l.loss));
    const cpu = await losses("cpu", "nano-graphs.yaml", ["--cuda-graphs"]);
    expect(cpu.stderr).toMatch(/warning: trainer.cuda_graphs \(--cuda-graphs\) has no effect on .*: only the CUDA backend records graphs/);
  }, 600_000);

  it(`trains latent attention (heads of 96) in bf16 like the wasm backend over ${MLA_STEPS} steps`, async () => {
    const sim = await losses("cuda-sim", "tiny-mla.yaml", ["--dtype", "bf16"]);
    const wasm = await losses("cpu", "tiny-mla.yaml", ["--dtype", "bf16"]);
    expect(sim.stderr).toMatch(/device\s+cuda-sim/);
    expect(sim.losses.length).toBe(MLA_STEPS);
    expect(wasm.losses.length).toBe(MLA_STEPS);
    // bf16 on two backends, the same math rounded in a different order: the losses agree
    // to about 4e-4 (relative) and the final weights to about 1e-2 (bf16 weights); with
    // the 128-wide backward reading the wrong half of each A fragment (a mutation tried),
    // the query and key projections end 0.3-0.46 apart while the losses stay within 1.3e-3.
    const worst = Math.max(...sim.losses.map((l, i) => Math.abs(l.loss! - wasm.losses[i].loss!) / wasm.losses[i].loss!));
    expect(worst, `sim ${sim.losses.map((l) => l.loss).join(", ")}\nwasm ${wasm.losses.map((l) => l.loss).join(", ")}`).toBeLessThan(1e-2);
    const [a, b] = await Promise.all([
      readCheckpoint(ws.path("out-cuda-sim-tiny-mla.yaml", "final.safetensors")),
      readCheckpoint(ws.path("out-cpu-tiny-mla.yaml", "final.safetensors")),
    ]);
    const projections = [...b.tensors.keys()].filter((n) => /(q_a|q_b|kv_a|kv_b)_proj/.test(n));
    expect(projections.length).toBe(8);
    for (const name of projections) {
      const [x, y] = [bf16Values(a.tensors.get(name)!), bf16Values(b.tensors.get(name)!)];
      let diff = 0, norm = 0;
      for (let i = 0; i < y.length; i++) (diff += (x[i] - y[i]) ** 2), (norm += y[i] ** 2);
      expect(Math.sqrt(diff / norm), name).toBeLessThan(0.05);
    }
    expect(sim.losses[MLA_STEPS - 1].loss!).toBeLessThan(sim.losses[0].loss! - 1);
  }, 600_000);
});
