import { mkdir } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRefused } from "./support/expectations.js";
import { MODELS_DIR } from "./support/paths.js";
import { Workspace } from "./support/workspace.js";

// kiln estimate plans memory for a shipped config on a named device without training.
const NANO = path.join(MODELS_DIR, "nano.yaml");

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("estimate");
});
afterAll(() => ws.remove());

describe("kiln estimate", () => {
  it("prints the total memory and the largest batch for nano in bf16 on an H100", async () => {
    const r = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\s+step\s+batch 8 x seq 256 x accum 4 = 8192 tokens, bf16$/m);
    expect(r.stdout).toMatch(/^\s+total\s+\d+(\.\d+)? [KMG]iB of 80\.0 GiB on NVIDIA H100 SXM 80GB \(\d+(\.\d+)?%\)$/m);
    expect(r.stdout).toMatch(/^\s+kernel scratch\s+not counted: the GPU kernels' own .* kiln train reserves when it compiles the step and shows in its banner$/m);
    const largest = /^\s+largest batch\s+(\d+) \(within 90% of device memory\)$/m.exec(r.stdout);
    expect(largest, r.stdout).not.toBeNull();
    expect(Number(largest![1])).toBeGreaterThan(8);

    // The same plan as data: the printed largest batch is the computed one.
    const json = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const e = JSON.parse(json.stdout) as { largestBatch: number; fits: boolean; memory: { total: number } };
    expect(e.largestBatch).toBe(Number(largest![1]));
    expect(e.fits).toBe(true);
    expect(e.memory.total).toBeGreaterThan(0);
    expect(e.memory.total).toBeLessThan(80 * 2 ** 30);
  });

  it("bounds the step by a roofline where the device's bandwidth is known, kernel by kernel", async () => {
    const r = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100"]);
    expect(r.code, r.stderr).toBe(0);
    const line = /^\s+roofline step\s+(\S+) (ms|s|µs) with each kernel at the longer of its FLOPs at peak and its operand bytes \((\d+\.\d) GB a step\) at 3350 GB\/s: MFU at most (\d+)%$/m.exec(r.stdout);
    expect(line, r.stdout).not.toBeNull();
    const json = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100", "--json"]);
    const e = JSON.parse(json.stdout) as { idealStepSeconds: number; flopsPerStep: number; roofline: { stepSeconds: number; bytesPerStep: number; mfu: number } };
    // Never faster than the FLOPs at peak; the MFU bound is the ideal step over the roofline one.
    expect(e.roofline.stepSeconds).toBeGreaterThan(e.idealStepSeconds);
    expect(e.roofline.mfu).toBeCloseTo(e.idealStepSeconds / e.roofline.stepSeconds, 12);
    expect(Number(line![4])).toBe(Math.round(100 * e.roofline.mfu));
    expect(Number(line![3])).toBe(Number((e.roofline.bytesPerStep / 1e9).toFixed(1)));
    // Four micro-batches: the step moves more than four times one micro-batch's 2048 rows of bf16 logits.
    expect(e.roofline.bytesPerStep).toBeGreaterThan(4 * 2048 * 50257 * 2);
    // No bandwidth figure for the CPU or a device known by its memory only: no roofline.
    for (const args of [["--device", "cpu"], ["--device-memory", "24GiB"]]) {
      const other = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", ...args]);
      expect(other.stdout).not.toMatch(/roofline/);
      // The CPU kernels take no scratch of their own beside the plan.
      if (args[1] === "cpu") expect(other.stdout).not.toMatch(/kernel scratch/);
    }
  });

  it("--kernels: the roofline step kernel by kernel, whose least times add up to it", async () => {
    const r = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100", "--kernels"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\s+kernel\s+calls\s+GB\s+GFLOP\s+least time\s+share\s+bound$/m);
    // Four micro-batches of 8 x 256 tokens: matmul first (nano's 512-wide products and the head's gradient added into
    // f32 move more bytes than the tensor cores need time: bound by memory); AdamW once a step, bound by its bytes.
    expect(r.stdout).toMatch(/^\s+matmul\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+ (ms|µs)\s+[\d.]+%\s+memory$/m);
    const adamw = /^\s+adamW\s+(\d+)\s+[\d.]+\s+0\.0\s+.*\smemory$/m.exec(r.stdout);
    expect(adamw, r.stdout).not.toBeNull();
    const json = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100", "--json"]);
    const e = JSON.parse(json.stdout) as { roofline: { stepSeconds: number; bytesPerStep: number; kernels: { kernel: string; calls: number; bytes: number; seconds: number }[] } };
    const sum = (key: "seconds" | "bytes") => e.roofline.kernels.reduce((t, k) => t + k[key], 0);
    expect(sum("seconds")).toBeCloseTo(e.roofline.stepSeconds, 12);
    expect(sum("bytes")).toBeCloseTo(e.roofline.bytesPerStep, 0);
    expect(e.roofline.kernels[0].kernel).toBe("matmul");
    expect(e.roofline.kernels.find((k) => k.kernel === "adamW")!.calls).toBe(Number(adamw![1]));
    // A micro-batch's kernels count four times: the loss's cross-entropy once per chunk of each.
    const ce = e.roofline.kernels.find((k) => k.kernel === "crossEntropyForward")!;
    expect(ce.calls % 4).toBe(0);
    expect(e.roofline.kernels.find((k) => k.kernel === "crossEntropyBackward")).toBeUndefined();
    const cpu = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "cpu", "--kernels"]);
    expect(cpu.code, cpu.stderr).toBe(0);
    expect(cpu.stdout).toMatch(/no roofline by kernel: no memory bandwidth figure for /);
  });

  it("resolves --recompute auto for the device: everything kept on a GPU it fits, GELU and norms recomputed on a smaller one and on the CPU", async () => {
    const activations = async (...args: string[]) => {
      const r = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", ...args, "--json"]);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { recompute: string; memory: { activations: number; total: number } };
    };
    const h100 = await activations("--device", "h100");
    const cheap = await activations("--device", "h100", "--recompute", "cheap");
    expect(h100.recompute).toBe("none");
    expect(cheap.recompute).toBe("cheap");
    expect(h100.memory.activations).toBeGreaterThan(cheap.memory.activations);
    // A card whose memory the keep-everything plan would fill past 85%, and the CPU: cheap.
    const small = await activations("--device-memory", `${Math.floor(h100.memory.total / 0.9 / 2 ** 20)}MiB`);
    expect(small.recompute).toBe("cheap");
    expect((await activations("--device", "cpu")).recompute).toBe("cheap");
    const r = await ws.run(["estimate", "-f", NANO, "--dtype", "bf16", "--device", "h100"]);
    expect(r.stdout).toMatch(/^\s+activations\s+.*\(.* without reuse; recompute: none, auto\)$/m);
  });

  it("--init-from a Hugging Face folder's config.json alone: a TinyLlama-1.1B plans on a 24 GiB GPU in bf16 and on the CPU", async () => {
    // TinyLlama-1.1B's config.json: 22 layers of hidden 2048, 32 query and 4 key/value heads, 1,100,048,384 parameters.
    const config = {
      architectures: ["LlamaForCausalLM"],
      model_type: "llama",
      hidden_size: 2048,
      intermediate_size: 5632,
      num_attention_heads: 32,
      num_hidden_layers: 22,
      num_key_value_heads: 4,
      vocab_size: 32000,
      max_position_embeddings: 2048,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      tie_word_embeddings: false,
      hidden_act: "silu",
    };
    await mkdir(ws.path("tinyllama"));
    await ws.write("tinyllama/config.json", JSON.stringify(config));
    for (const device of [["--device-memory", "24GiB"], ["--device", "cpu"]]) {
      const r = await ws.run(["estimate", "--init-from", "tinyllama", "--dtype", "bf16", "--batch-size", "1", "--seq-len", "512", ...device, "--json"]);
      expect(r.code, r.stderr).toBe(0);
      const e = JSON.parse(r.stdout) as { parameters: number; memory: { parameters: number; optimizerState: number; total: number } };
      expect(e.parameters).toBe(1_100_048_384);
      // bf16 weights beside their f32 masters (6 bytes a parameter), AdamW's m and v in f32 (8), each tensor 64-byte aligned.
      expect(e.memory.parameters / (6 * e.parameters)).toBeCloseTo(1, 4);
      expect(e.memory.optimizerState / (8 * e.parameters)).toBeCloseTo(1, 4);
    }
    const text = await ws.run(["estimate", "--init-from", "tinyllama", "--dtype", "bf16", "--batch-size", "1", "--seq-len", "512", "--device-memory", "24GiB"]);
    expect(text.stdout).toMatch(/^kiln estimate --init-from tinyllama$/m);
    expect(text.stdout).toMatch(/model\s+llama, 1\.10B parameters \(1100048384\)/);
  });

  it("refuses an unknown device, listing the known ones", async () => {
    expectRefused(await ws.run(["estimate", "-f", NANO, "--device", "tpu9"]), {
      kind: "ConfigError",
      where: "--device",
      message: /^unknown device "tpu9"/,
      hint: /use one of cpu, .*h100, h200/,
    });
  });
});

describe("kiln estimate for devices outside the table, and plan-only ones", () => {
  it("plans for any device by its memory with --device-memory, with no exponents in what it prints", async () => {
    const r = await ws.run(["estimate", "-f", NANO, "--device-memory", "24GiB"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\s+total\s+\d+(\.\d+)? [KMG]iB of 24\.0 GiB on a device \(\d+(\.\d+)?%\)$/m);
    expect(r.stdout).toMatch(/^\s+FLOPs\s+\d+(\.\d+)? [kMGTP]FLOP per token, \d+(\.\d+)? [kMGTP]FLOP per step$/m);
    expect(r.stdout).toMatch(/^\s+ideal step\s+unknown: no f32 peak FLOP\/s figure for a device$/m);
    expect(r.stdout).not.toMatch(/\de[+-]\d/);
  });

  it("says a T4 has no bf16 and that kiln cannot train on it", async () => {
    const r = await ws.run(["estimate", "-f", NANO, "--device", "t4", "--dtype", "bf16"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\s+ideal step\s+unknown: no bf16 peak FLOP\/s figure for NVIDIA T4 16GB$/m);
    expect(r.stdout).toMatch(/^note: NVIDIA T4 16GB is Turing \(sm_75\); kiln's CUDA kernels are built for sm_80 and newer: kiln can plan for it, but cannot train on it$/m);
  });
});
