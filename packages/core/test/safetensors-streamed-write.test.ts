import fs from "node:fs";
import { open } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CheckpointError, createReferenceBackend } from "@kiln/contract";
import {
  type SafetensorsTensorInput,
  type StreamedTensorInput,
  type TensorByteSource,
  encodeSafetensors,
  encodeStreamedSafetensors,
  readSafetensors,
  writeSafetensors,
} from "../src/index.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer } from "../src/train/trainer.js";
import { saveTrainedWeights, saveTrainerCheckpoint } from "../src/train/checkpoint-state.js";

/** A source over `bytes` that records the largest piece it was asked for. */
function recordingSource(bytes: Uint8Array, seen: { largest: number; reads: number }): TensorByteSource {
  return {
    byteLength: bytes.byteLength,
    async read(target, offset) {
      seen.largest = Math.max(seen.largest, target.byteLength);
      seen.reads++;
      target.set(bytes.subarray(offset, offset + target.byteLength));
    },
  };
}

const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function sampleTensors(): SafetensorsTensorInput[] {
  const big = Float32Array.from({ length: 100_003 }, (_, i) => Math.sin(i));
  return [
    { name: "big", dtype: "F32", shape: [100_003], data: big },
    { name: "half", dtype: "BF16", shape: [3, 7], data: Uint16Array.from({ length: 21 }, (_, i) => i * 977) },
    { name: "wide", dtype: "F64", shape: [5], data: Float64Array.from([1, -2, 3.5, 1e300, -0]) },
    { name: "bytes", dtype: "U8", shape: [9], data: Uint8Array.from({ length: 9 }, (_, i) => i * 31) },
  ];
}

const dirs: string[] = [];
const tempDir = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-stream-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe("streamed safetensors writes", () => {
  it("write the same bytes as the in-memory encoder", async () => {
    const tensors = sampleTensors();
    const seen = { largest: 0, reads: 0 };
    const streamed: StreamedTensorInput[] = tensors.map((t) => ({ ...t, data: recordingSource(bytesOf(t.data), seen) }));
    const file = path.join(tempDir(), "m.safetensors");
    await writeSafetensors(file, streamed, { step: "4" }, { bufferBytes: 4096 });
    const expected = encodeSafetensors(tensors, { step: "4" });
    expect(Buffer.from(fs.readFileSync(file)).equals(Buffer.from(expected))).toBe(true);
    expect(Buffer.from(await encodeStreamedSafetensors(streamed, { step: "4" })).equals(Buffer.from(expected))).toBe(true);
    expect(seen.reads).toBeGreaterThan(100_003 / 1024);
  });

  it("hold no piece larger than the buffer: every source read and file write fits in it", async () => {
    const bufferBytes = 4096;
    const seen = { largest: 0, reads: 0 };
    const tensors = sampleTensors().map((t) => ({ ...t, data: recordingSource(bytesOf(t.data), seen) }));
    const probe = await open(path.join(tempDir(), "probe"), "w");
    const handleProto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<unknown> };
    await probe.close();
    const writes: number[] = [];
    const original = handleProto.write;
    vi.spyOn(handleProto, "write").mockImplementation(function (this: unknown, ...args: unknown[]) {
      const [data, , length] = args as [ArrayBufferView | string, number | undefined, number | undefined];
      writes.push(typeof length === "number" ? length : typeof data === "string" ? data.length : data.byteLength);
      return original.apply(this, args);
    });
    await writeSafetensors(path.join(tempDir(), "m.safetensors"), tensors, {}, { bufferBytes });
    expect(seen.largest).toBeLessThanOrEqual(bufferBytes);
    expect(writes.length).toBeGreaterThanOrEqual(Math.floor(400_000 / bufferBytes));
    expect(Math.max(...writes)).toBeLessThanOrEqual(bufferBytes);
  });

  it("leave the previous file whole when a source fails part-way", async () => {
    const dir = tempDir();
    const file = path.join(dir, "m.safetensors");
    await writeSafetensors(file, sampleTensors(), { step: "1" });
    const failing: TensorByteSource = {
      byteLength: 400_012,
      async read(_target, offset) {
        if (offset > 100_000) throw new Error("device lost");
      },
    };
    const err = await writeSafetensors(file, [{ name: "big", dtype: "F32", shape: [100_003], data: failing }], { step: "2" }, { bufferBytes: 8192 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointError);
    expect((await readSafetensors(file)).metadata.step).toBe("1");
    expect(fs.readdirSync(dir)).toEqual(["m.safetensors"]);
  });

  it("refuse a source whose length does not match its shape, before creating anything", async () => {
    const dir = tempDir();
    const source = recordingSource(new Uint8Array(12), { largest: 0, reads: 0 });
    await expect(writeSafetensors(path.join(dir, "m.safetensors"), [{ name: "x", dtype: "F32", shape: [4], data: source }])).rejects.toThrow(/data has 12 bytes/);
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

describe("trainer checkpoints are streamed from the device", () => {
  // Embedding 4096 x 320 f32 = 5 MiB: larger than the 4 MiB write buffer.
  const model = resolveModelConfig({ arch: "gpt2", vocabSize: 4096, hiddenSize: 320, numLayers: 1, numHeads: 4, maxSeqLen: 8 });
  const config = {
    model,
    batchSize: 1,
    seqLen: 8,
    optimizer: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 },
    schedule: { kind: "constant" as const, peak: 1e-3, min: 1e-3, warmupSteps: 0, maxSteps: 4 },
    seed: 3,
  };

  it("download no piece larger than the write buffer and write what readParameters reads", async () => {
    const backend = createReferenceBackend();
    const trainer = new Trainer(backend, config);
    const downloads: number[] = [];
    const download = backend.download.bind(backend);
    backend.download = (src, out) => {
      downloads.push(out.byteLength);
      return download(src, out);
    };
    const file = path.join(tempDir(), "step_0.safetensors");
    await saveTrainerCheckpoint(trainer, file);
    expect(Math.max(...downloads)).toBeLessThanOrEqual(4 << 20);
    const saved = await readSafetensors(file);
    const params = await trainer.readParameters("master");
    expect(params.get("transformer.wte.weight")!.byteLength).toBeGreaterThan(4 << 20);
    for (const [name, values] of params) expect(Buffer.from(saved.tensors.get(name)!.data).equals(Buffer.from(bytesOf(values))), name).toBe(true);
    trainer.dispose();
  });

  it("round 16-bit exports from the f32 masters as the in-memory encoder does", async () => {
    const trainer = new Trainer(createReferenceBackend(), config);
    const file = path.join(tempDir(), "final.safetensors");
    await saveTrainedWeights(trainer, file, {}, "bf16");
    const saved = await readSafetensors(file);
    const { encodeToBytes } = await import("@kiln/contract");
    for (const [name, values] of await trainer.readParameters("master")) {
      expect(saved.tensors.get(name)!.dtype).toBe("BF16");
      expect(Buffer.from(saved.tensors.get(name)!.data).equals(Buffer.from(encodeToBytes(values, "bf16"))), name).toBe(true);
    }
    trainer.dispose();
  });
});
