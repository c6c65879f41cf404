import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { differingTensors, metricsLog, readCheckpoint } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Training in bf16 and f16: the banner says which dtype and why, checkpoints keep
// f32 masters and resume bit for bit, final.safetensors holds the training dtype.
const N = 6;
const K = 3;

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("dtype");
  await ws.writeTokens("data.bin", textTokens(3000));
  await ws.writeConfig("run.yaml", { trainer: { max_steps: N, save_interval: K, gradient_accumulation: 2, warmup_steps: 2, eval_interval: 1000 }, data: { tokenizer: "bytes" } });
});
afterEach(() => ws.remove());

async function train(out: string, ...args: string[]) {
  return expectSuccess(await ws.run(["train", "-f", "run.yaml", "-d", "data.bin", "--output-dir", out, "--headless", ...args]), `kiln train ${args.join(" ")}`);
}

const lossLines = async (dir: string) => (await metricsLog(dir)).filter((l) => "loss" in l);

describe.each([
  { dtype: "bf16", flag: ["--bf16"], source: "--bf16" },
  { dtype: "f16", flag: ["--dtype", "fp16"], source: "--dtype f16" },
] as const)("kiln train $source", ({ dtype, flag, source }) => {
  it("trains in the dtype, says so, and resumes bit for bit", async () => {
    const straight = await train("straight", ...flag);
    expect(straight.stderr).toMatch(new RegExp(`dtype +${dtype}: ${dtype} weights and activations.*f32 master weights.*\\(${source}\\)`));
    await train("split", ...flag, "--max-steps", String(K));
    await train("split", ...flag, "--resume", "auto");

    const a = await readCheckpoint(ws.path("straight", `step_${N}.safetensors`));
    const b = await readCheckpoint(ws.path("split", `step_${N}.safetensors`));
    expect(a.metadata["kiln.dtype"]).toBe(dtype);
    expect(differingTensors(a, b)).toEqual([]);
    expect(b.metadata).toEqual(a.metadata);
    const strip = (lines: Record<string, unknown>[]) => lines.map(({ step, loss, grad_norm, learning_rate, loss_scale }) => ({ step, loss, grad_norm, learning_rate, loss_scale }));
    expect(strip(await lossLines(ws.path("split")))).toEqual(strip(await lossLines(ws.path("straight"))));
    const lines = await lossLines(ws.path("straight"));
    expect(lines.map((l) => l.step)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const l of lines) expect(l.loss_scale).toBe(dtype === "f16" ? 65536 : undefined);
  });

  it("writes final.safetensors in the dtype (f32 with --export-dtype f32) and kiln sample reads both", async () => {
    await train("half", ...flag);
    await train("full", ...flag, "--export-dtype", "f32");
    const half = await readCheckpoint(ws.path("half", "final.safetensors"));
    const full = await readCheckpoint(ws.path("full", "final.safetensors"));
    expect(half.metadata["kiln.dtype"]).toBe(dtype);
    expect(full.metadata["kiln.dtype"]).toBe("f32");
    const weight = "transformer.wte.weight";
    expect(half.tensors.get(weight)!.byteLength * 2).toBe(full.tensors.get(weight)!.byteLength);
    for (const dir of ["half", "full"]) {
      const r = await ws.run(["sample", "--checkpoint", `${dir}/final.safetensors`, "--prompt", "Once", "--max-tokens", "8", "--temperature", "0"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.startsWith("Once")).toBe(true);
    }
  });
});

describe("dtype choice", () => {
  it("trainer.dtype: auto picks bf16 on the CPU and the banner says why; bfloat16 is another spelling of bf16", async () => {
    await ws.writeConfig("auto.yaml", { trainer: { max_steps: 2, dtype: "auto" } });
    const auto = expectSuccess(await ws.run(["train", "-f", "auto.yaml", "-d", "data.bin", "--output-dir", "auto", "--headless"]), "kiln train auto");
    expect(auto.stderr).toMatch(/dtype +bf16: .*\(auto, from trainer\.dtype in auto\.yaml: .*runs bf16/);
    await ws.writeConfig("spelled.yaml", { trainer: { max_steps: 2, dtype: "bfloat16" } });
    const spelled = expectSuccess(await ws.run(["train", "-f", "spelled.yaml", "-d", "data.bin", "--output-dir", "spelled", "--headless"]), "kiln train bfloat16");
    expect(spelled.stderr).toMatch(/dtype +bf16: /);
    const a = await readCheckpoint(ws.path("auto", "step_2.safetensors"));
    const b = await readCheckpoint(ws.path("spelled", "step_2.safetensors"));
    expect(differingTensors(a, b)).toEqual([]);
  });

  it("kiln estimate --dtype plans every dtype: 16-bit adds f32 masters, gradients stay f32", async () => {
    const plans: Record<string, { memory: { parameters: number; gradients: number; optimizerState: number; activations: number } }> = {};
    for (const dtype of ["f32", "bf16", "f16", "auto"]) {
      const r = expectSuccess(await ws.run(["estimate", "-f", "run.yaml", "--dtype", dtype, "--json"]), `kiln estimate --dtype ${dtype}`);
      plans[dtype] = JSON.parse(r.stdout);
    }
    expect(plans.bf16.memory).toEqual(plans.f16.memory);
    expect(plans.auto.memory).toEqual(plans.bf16.memory);
    expect(plans.bf16.memory.optimizerState).toBe(plans.f32.memory.optimizerState);
    expect(plans.bf16.memory.gradients).toBe(plans.f32.memory.gradients);
    expect(plans.bf16.memory.parameters).toBeGreaterThan(plans.f32.memory.parameters);
    expect(plans.bf16.memory.activations).toBeLessThan(plans.f32.memory.activations);
  });
});
