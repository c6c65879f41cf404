import { describe, expect, it } from "vitest";
import { type Backend, type FloatDType, createReferenceBackend, encodeToBytes } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { kernelNodeAttrs } from "../src/graph/kernel-node.js";
import { buildEvalGraph } from "../src/model/build-graph.js";
import { tinyModels } from "./support/tiny-models.js";
import { paramLayout } from "../src/model/param-layout.js";
import { planTraining } from "../src/train/plan-training.js";

const models = tinyModels;
const attrsOf = kernelNodeAttrs;

describe("residual sums written by the norms that read them", () => {
  for (const [arch, model] of Object.entries(models)) {
    // GPT-2: the embedding sum and every block's two sums feed a norm; Llama: every block's two.
    const fused = 2 * model.numLayers + (arch === "gpt2" ? 1 : 0);
    for (const recompute of ["none", "cheap", "blocks"] as const) {
      it(`${arch}, recompute ${recompute}: no add left in the forward pass; ${fused} norms write the sum they normalize`, () => {
        const { graph } = planTraining(model, 2, 8, "bf16", recompute);
        const forward = graph.graph.nodes.filter((n) => !n.backward);
        expect(forward.filter((n) => attrsOf(n).kernel === "add")).toEqual([]);
        const norms = forward.filter((n) => attrsOf(n).operands.residual !== undefined);
        expect(norms).toHaveLength(fused);
        for (const n of norms) {
          const { x, residual, sum } = attrsOf(n).operands;
          expect(n.inputs).toEqual(expect.arrayContaining([x.id, residual.id]));
          expect(n.outputs).toContain(sum.id);
          expect(n.inputs).not.toContain(sum.id);
        }
      });
    }

    it(`${arch}: the evaluation graph folds the same sums`, () => {
      const g = buildEvalGraph(model, paramLayout(model, "f32"), 2, 8).graph;
      expect(g.nodes.filter((n) => attrsOf(n).kernel === "add")).toEqual([]);
      expect(g.nodes.filter((n) => attrsOf(n).operands?.residual !== undefined)).toHaveLength(fused);
    });
  }
});

const backends: [string, () => Promise<Backend> | Backend][] = [
  ["reference", () => createReferenceBackend()],
  ["wasm", () => createWasmBackend({ threads: 2, measurePeak: false })],
  ...(cudaStatus().simulator.built ? [["cuda-sim", () => createCudaSimBackend()] as [string, () => Backend]] : []),
];

/** x, residual, weight, bias of (rows, dim) as dtype bytes: values with sums that round. */
function inputs(rows: number, dim: number, dtype: FloatDType) {
  let s = 7;
  const rand = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32) * 4 - 2;
  const make = (n: number) => encodeToBytes(Float64Array.from({ length: n }, rand), dtype);
  return { x: make(rows * dim), residual: make(rows * dim), weight: make(dim), bias: make(dim) };
}

describe("a norm forward with a residual gives the bits of an add and then the norm", () => {
  for (const [name, open] of backends) {
    for (const kernel of ["layerNormForward", "rmsNormForward"] as const) {
      for (const dtype of ["f32", "bf16", "f16"] as const) {
        // 768: GPT-2's rows (16-byte vectors on the GPU's warp-per-row path); 37: rows of one block's threads.
        for (const dim of [768, 37]) {
          it(`${name} ${kernel} ${dtype} dim ${dim}`, async () => {
            const backend = await open();
            const rows = 5;
            const data = inputs(rows, dim, dtype);
            const upload = (bytes: Uint8Array) => {
              const b = backend.alloc(bytes.byteLength);
              backend.upload(b, bytes);
              return b;
            };
            const [x, residual, weight, bias] = [upload(data.x), upload(data.residual), upload(data.weight), upload(data.bias)];
            const rowBytes = data.x.byteLength;
            const alloc = (n: number) => backend.alloc(n);
            const fused = { out: alloc(rowBytes), sum: alloc(rowBytes), mean: alloc(4 * rows), rstd: alloc(4 * rows) };
            const twoCalls = { out: alloc(rowBytes), sum: alloc(rowBytes), mean: alloc(4 * rows), rstd: alloc(4 * rows) };
            const layer = kernel === "layerNormForward";
            const norm = (args: Record<string, unknown>) => backend.kernels[kernel]({ weight, rows, dim, eps: 1e-5, dtype, ...(layer ? { bias } : {}), ...args } as never);
            norm({ x, residual, sum: fused.sum, out: fused.out, rstd: fused.rstd, ...(layer ? { mean: fused.mean } : {}) });
            backend.kernels.add({ a: x, b: residual, out: twoCalls.sum, n: rows * dim, dtype });
            norm({ x: twoCalls.sum, out: twoCalls.out, rstd: twoCalls.rstd, ...(layer ? { mean: twoCalls.mean } : {}) });
            const read = async (b: (typeof fused)["out"]) => {
              const out = new Uint8Array(b.byteLength);
              await backend.download(b, out);
              return out;
            };
            for (const key of ["sum", "out", "rstd", ...(layer ? ["mean"] : [])] as const) {
              expect(await read(fused[key]), key).toEqual(await read(twoCalls[key]));
            }
            // The sum is not x: the comparison is of real work.
            expect(await read(fused.sum)).not.toEqual(data.x);
            backend.dispose?.();
          });
        }
      }
    }
  }
});

describe("bias gradients summed by the backwards that write their rows", () => {
  for (const recompute of ["none", "cheap", "blocks"] as const) {
    it(`gpt2, recompute ${recompute}: the output projections' by the norm backwards, c_fc's by GELU's; only c_attn's keep their sumRows`, () => {
      const model = models.gpt2;
      const { graph } = planTraining(model, 2, 8, "bf16", recompute);
      const g = graph.graph;
      const backward = g.nodes.filter((n) => n.backward);
      const summing = backward.filter((n) => attrsOf(n).operands.dXColSums !== undefined);
      expect(summing).toHaveLength(3 * model.numLayers);
      const by = (kernel: string) => summing.filter((n) => attrsOf(n).kernel === kernel).map((n) => g.info(attrsOf(n).operands.dXColSums.id).name);
      for (let l = 0; l < model.numLayers; l++) {
        expect(by("layerNormBackward")).toContain(`grad(transformer.h.${l}.attn.c_proj.bias)`);
        expect(by("layerNormBackward")).toContain(`grad(transformer.h.${l}.mlp.c_proj.bias)`);
        expect(by("geluBackward")).toContain(`grad(transformer.h.${l}.mlp.c_fc.bias)`);
      }
      for (const n of summing) expect(n.outputs).toContain(attrsOf(n).operands.dXColSums.id);
      for (const n of summing.filter((m) => attrsOf(m).kernel === "geluBackward")) {
        expect(attrsOf(n).args).toMatchObject({ cols: 4 * model.hiddenSize, gradDtype: "f32" });
      }
      // c_attn's bias: its rows come from attention's backward.
      const left = backward.filter((n) => attrsOf(n).kernel === "sumRows").map((n) => g.info(attrsOf(n).operands.out.id).name);
      expect(left).toEqual(Array.from({ length: model.numLayers }, (_, l) => `grad(transformer.h.${model.numLayers - 1 - l}.attn.c_attn.bias)`));
    });
  }

  it("llama has no biases: nothing to fold", () => {
    const { graph } = planTraining(models.llama, 2, 8, "bf16", "none");
    expect(graph.graph.nodes.filter((n) => attrsOf(n).operands?.dXColSums !== undefined)).toEqual([]);
  });
});
