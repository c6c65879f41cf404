import { describe, expect, it } from "vitest";
import { type Backend, type BufferHandle, bytesPerElement } from "@kiln/contract";
import { seededRandom } from "@kiln/contract/conformance";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { elementCount } from "../src/graph/tensor.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { paramLayout } from "../src/model/param-layout.js";
import { paramRuns } from "../src/model/param-runs.js";
import { AdamW } from "../src/optim/adamw.js";
import { MasterWeights } from "../src/train/master-weights.js";

// hidden 20: a (20) bias is 80 f32 bytes, padded to 128 in the flat buffer; vocab 37 makes the embeddings' sizes odd.
const odd = resolveModelConfig({ arch: "gpt2", vocabSize: 37, hiddenSize: 20, numLayers: 2, numHeads: 2, maxSeqLen: 8 });
const gpt2Small = resolveModelConfig({ arch: "gpt2", vocabSize: 50257, hiddenSize: 768, numLayers: 12, numHeads: 12, maxSeqLen: 1024 });

describe("parameters cut into runs that lie back to back", () => {
  it("covers every parameter once, in buffer order, and never spans padding in any layout", () => {
    for (const layouts of [[paramLayout(odd, "f32")], [paramLayout(odd, "bf16"), paramLayout(odd, "f32")]]) {
      const runs = paramRuns(layouts);
      const specs = layouts[0].stored;
      expect([...specs].sort((a, b) => a.name.localeCompare(b.name))).toEqual([...layouts[0].specs].sort((a, b) => a.name.localeCompare(b.name)));
      let i = 0;
      for (const run of runs) {
        expect(run.first).toBe(specs[i]);
        let elements = 0;
        while (elements < run.n) {
          for (const l of layouts) expect(l.offsets.get(specs[i].name)).toBe(l.offsets.get(run.first.name)! + elements * bytesPerElement(l.dtype));
          elements += elementCount(specs[i].shape);
          i++;
        }
        expect(elements).toBe(run.n);
      }
      expect(i).toBe(specs.length);
      // The 20-wide biases and norms end in padding, so not everything is one run; some runs hold several parameters.
      expect(runs.length).toBeGreaterThan(1);
      expect(runs.length).toBeLessThan(specs.length);
    }
  });

  it("gpt2-small: one cast for every 16-bit parameter, one AdamW call for the decaying parameters and one for the others", () => {
    const bf16 = paramLayout(gpt2Small, "bf16");
    const f32 = paramLayout(gpt2Small, "f32");
    expect(bf16.specs.length).toBe(148);
    expect(paramRuns([bf16, f32])).toEqual([{ first: bf16.stored[0], n: bf16.count }]);
    const byDecay = paramRuns([f32, f32], (a, b) => a.decay === b.decay);
    // The 48 matrices of the 12 layers, then the embeddings, biases and norms (in spec order, 97 runs).
    expect(byDecay.map((r) => [r.first.name, r.first.decay])).toEqual([["transformer.h.0.attn.c_attn.weight", true], ["transformer.wte.weight", false]]);
    const matrices = 12 * (768 * 2304 + 768 * 768 + 2 * 768 * 3072);  // attention in and out, MLP up and down
    expect(byDecay.map((r) => r.n)).toEqual([matrices, bf16.count - matrices]);
    for (const run of byDecay) expect(bf16.specs.filter((s) => s.decay !== run.first.decay && f32.offsets.get(s.name)! >= f32.offsets.get(run.first.name)! && f32.offsets.get(s.name)! < f32.offsets.get(run.first.name)! + 4 * run.n)).toEqual([]);
  });
});

/** A buffer of `bytes` random f32 values (uniform in [lo, hi)). */
function randomBuffer(backend: Backend, bytes: number, seed: number, lo: number, hi: number): BufferHandle {
  const rand = seededRandom(seed);
  const b = backend.alloc(bytes);
  backend.upload(b, Float32Array.from({ length: bytes / 4 }, () => lo + (hi - lo) * rand()));
  return b;
}

async function read(backend: Backend, b: BufferHandle): Promise<Uint8Array> {
  const out = new Uint8Array(b.byteLength);
  await backend.download(b, out);
  return out;
}

describe("optimizer calls by runs give every parameter the bits of one call per parameter", () => {
  for (const model of [odd, resolveModelConfig({ arch: "llama", vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, kvHeads: 2, intermediateSize: 48, maxSeqLen: 8 })]) {
    it(`${model.arch}, hidden ${model.hiddenSize}: AdamW over the f32 layout and rounding bf16 parameters from f32 masters`, async () => {
      const backend = await createWasmBackend({ threads: 2, measurePeak: false });
      const f32 = paramLayout(model, "f32");
      const bf16 = paramLayout(model, "bf16");
      const config = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
      const fresh = () => ({
        params: randomBuffer(backend, f32.bytes, 1, -1, 1),
        grads: randomBuffer(backend, f32.bytes, 2, -1, 1),
        m: randomBuffer(backend, f32.bytes, 3, -0.1, 0.1),
        v: randomBuffer(backend, f32.bytes, 4, 0, 0.05),
      });
      const byRuns = fresh();
      new AdamW(backend, f32, f32, byRuns, config).update(3e-3, 7, 0.5);
      const each = fresh();
      for (const s of f32.specs) {
        const at = (buffer: BufferHandle) => ({ buffer, byteOffset: f32.offsets.get(s.name)! });
        backend.kernels.adamW({ param: at(each.params), grad: at(each.grads), m: at(each.m), v: at(each.v), n: elementCount(s.shape), lr: 3e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: s.decay ? 0.1 : 0, step: 7, gradScale: 0.5, dtype: "f32" });
      }
      for (const key of ["params", "m", "v"] as const) expect(await read(backend, byRuns[key]), key).toEqual(await read(backend, each[key]));
      // The updates changed the parameters (the comparison is not of untouched buffers).
      expect(await read(backend, byRuns.params)).not.toEqual(await read(backend, fresh().params));

      const rounded = backend.alloc(bf16.bytes);
      const expected = backend.alloc(bf16.bytes);
      for (const b of [rounded, expected]) backend.kernels.fill({ out: b, n: bf16.bytes / 2, value: 0, dtype: "u16" });
      const masters = new MasterWeights(backend, bf16, f32, rounded);
      backend.copy(byRuns.params, masters.master, f32.bytes);
      masters.roundToParams();
      for (const s of bf16.specs) {
        backend.kernels.cast({ src: { buffer: byRuns.params, byteOffset: f32.offsets.get(s.name)! }, dst: { buffer: expected, byteOffset: bf16.offsets.get(s.name)! }, n: elementCount(s.shape), srcDtype: "f32", dstDtype: "bf16" });
      }
      expect(await read(backend, rounded)).toEqual(await read(backend, expected));
      backend.dispose();
    });

    it(`${model.arch}, hidden ${model.hiddenSize}: AdamW on bf16 parameters with f32 masters and gradients = AdamW on the masters, then the cast`, async () => {
      const backend = await createWasmBackend({ threads: 2, measurePeak: false });
      const f32 = paramLayout(model, "f32");
      const bf16 = paramLayout(model, "bf16");
      const config = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
      const fresh = () => {
        const params = backend.alloc(bf16.bytes);
        backend.kernels.fill({ out: params, n: bf16.bytes / 2, value: 0, dtype: "u16" });
        const masters = new MasterWeights(backend, bf16, f32, params);
        backend.copy(randomBuffer(backend, f32.bytes, 1, -1, 1), masters.master, f32.bytes);
        return { params, masters, grads: randomBuffer(backend, f32.bytes, 2, -1, 1), m: randomBuffer(backend, f32.bytes, 3, -0.1, 0.1), v: randomBuffer(backend, f32.bytes, 4, 0, 0.05) };
      };
      const fused = fresh();
      new AdamW(backend, bf16, f32, { ...fused, master: fused.masters.master }, config).update(3e-3, 7, 0.5);
      const twoPasses = fresh();
      new AdamW(backend, f32, f32, { ...twoPasses, params: twoPasses.masters.master }, config).update(3e-3, 7, 0.5);
      twoPasses.masters.roundToParams();
      for (const key of ["params", "m", "v"] as const) expect(await read(backend, fused[key]), key).toEqual(await read(backend, twoPasses[key]));
      expect(await read(backend, fused.masters.master)).toEqual(await read(backend, twoPasses.masters.master));
      // The update changed the rounded parameters (the comparison is not of untouched buffers).
      expect(await read(backend, fused.params)).not.toEqual(await read(backend, fresh().params));
      backend.dispose();
    });
  }
});
