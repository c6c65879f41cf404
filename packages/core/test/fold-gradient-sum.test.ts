import { describe, expect, it } from "vitest";
import { Graph } from "../src/graph/graph.js";
import { addKernelNode, kernelNodeAttrs } from "../src/graph/kernel-node.js";
import { foldGradientSum } from "../src/autodiff/fold-gradient-sum.js";
import { tinyModels } from "./support/tiny-models.js";
import { planTraining } from "../src/train/plan-training.js";

const models = tinyModels;
const attrsOf = kernelNodeAttrs;

describe("a tensor's gradients summed by the kernels that make them", () => {
  for (const [arch, model] of Object.entries(models)) {
    for (const recompute of ["none", "cheap"] as const) {
      it(`${arch}, recompute ${recompute}: the block norms take the residual gradient (dX over it), projections of one input accumulate; no add is left`, () => {
        const { graph, step } = planTraining(model, 2, 8, "bf16", recompute);
        const g = graph.graph;
        const backward = g.nodes.filter((n) => n.backward);
        const norms = backward.filter((n) => /NormBackward$/.test(attrsOf(n).kernel));
        const folded = norms.filter((n) => attrsOf(n).operands.dResidual !== undefined);
        // Every block's two norms; the final norm's input has one consumer.
        expect(folded).toHaveLength(2 * model.numLayers);
        expect(norms).toHaveLength(2 * model.numLayers + 1);
        expect(backward.filter((n) => attrsOf(n).kernel === "add")).toEqual([]);
        for (const n of folded) {
          const { dX, dResidual } = attrsOf(n).operands;
          expect(n.inputs).toContain(dResidual.id);
          expect(step.arena.offsets.get(dX.id)).toBe(step.arena.offsets.get(dResidual.id));
        }
        // Input gradients summed by accumulating matmuls: Llama's k and q onto v's, up onto gate's (GPT-2 projects once).
        const accumulating = backward.filter((n) => attrsOf(n).kernel === "matmul" && attrsOf(n).args.accumulate && g.info(attrsOf(n).operands.c.id).kind === "activation");
        expect(accumulating).toHaveLength(arch === "llama" ? 3 * model.numLayers : 0);
        for (const n of accumulating) expect(n.inputs).toContain(attrsOf(n).operands.c.id);
      });
    }
  }

  it("keeps the add when the other gradient is written at or after the norm, or when grad is not a norm's dX", () => {
    const g = new Graph();
    const t = (name: string, kind: "activation" | "param" = "activation") => g.tensor([4, 8], "f32", kind, name);
    const [x, w, dOut, rstd] = [t("x"), g.tensor([8], "f32", "param", "w"), t("dOut"), g.tensor([4], "f32", "activation", "rstd")];
    const dW = g.tensor([8], "f32", "grad", "dW", w);
    const [early, dX, late] = [t("early"), t("dX"), t("late")];
    addKernelNode(g, "fill", { out: early }, { n: 32, value: 1, dtype: "f32" });
    addKernelNode(g, "rmsNormBackward", { dOut, x, weight: w, rstd, dX, dWeight: dW }, { rows: 4, dim: 8, dtype: "f32" });
    addKernelNode(g, "fill", { out: late }, { n: 32, value: 1, dtype: "f32" });
    expect(foldGradientSum(g, late, dX)).toBeUndefined();
    expect(foldGradientSum(g, early, late)).toBeUndefined();
    expect(attrsOf(g.nodes[1]).operands.dResidual).toBeUndefined();
    expect(foldGradientSum(g, early, dX)).toBe(dX);
    expect(attrsOf(g.nodes[1]).operands.dResidual).toEqual({ id: early });
    expect(g.nodes[1].inputs).toContain(early);
    // Only once: a second sum into the same dX needs its own add.
    expect(foldGradientSum(g, early, dX)).toBeUndefined();
  });
});

describe("a matmul that accumulates a gradient sum", () => {
  const setup = (matmulArgs: Record<string, unknown> = {}) => {
    const g = new Graph();
    const cDtype = matmulArgs.cDtype === "f32" ? "f32" : "bf16";
    const a = g.tensor([4, 3], "bf16", "activation", "dY");
    const w = g.tensor([3, 8], "bf16", "param", "w");
    const [first, second] = [g.tensor([4, 8], cDtype, "activation", "first"), g.tensor([4, 8], cDtype, "activation", "second")];
    addKernelNode(g, "fill", { out: first }, { n: 32, value: 1, dtype: cDtype });
    addKernelNode(g, "matmul", { a, b: w, c: second }, { m: 4, n: 8, k: 3, dtype: "bf16", ...matmulArgs });
    return { g, first, second };
  };

  it("writes into the earlier gradient with accumulate, which then holds the sum", () => {
    const { g, first, second } = setup();
    expect(foldGradientSum(g, first, second)).toBe(first);
    const node = g.nodes[1];
    expect(attrsOf(node).operands.c).toEqual({ id: first });
    expect(attrsOf(node).args.accumulate).toBe(true);
    expect(node.inputs).toContain(first);
    expect(node.outputs).toEqual([first]);
  });

  for (const [what, args] of [["already accumulates", { accumulate: true }], ["writes a wider C", { cDtype: "f32" }]] as const) {
    it(`leaves a matmul that ${what} alone`, () => {
      const { g, first, second } = setup(args);
      expect(foldGradientSum(g, first, second)).toBeUndefined();
      expect(attrsOf(g.nodes[1]).operands.c).toEqual({ id: second });
    });
  }
});
