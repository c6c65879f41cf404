import type { Graph } from "../graph/graph.js";
import { addKernelNode, type KernelNodeAttrs } from "../graph/kernel-node.js";
import type { BackwardBuilder } from "../graph/op.js";
import { gradRules } from "../ops/index.js";
import { paramGradTensor } from "../ops/grad-rule.js";
import { foldGradientSum } from "./fold-gradient-sum.js";

export interface BackwardResult {
  /** Parameter tensor id -> its gradient tensor id. */
  paramGrads: Map<number, number>;
}

/**
 * Where the backward pass starts: the node whose gradient rule begins it (the loss), or
 * gradients the forward pass already computed: `grads` of activations made by nodes before
 * node `before`, and gradient tensors `paramGrads` already accumulated into.
 */
export type BackwardStart = { lossNode: number } | { before: number; grads: Map<number, number>; paramGrads: Map<number, number> };

/**
 * Reverse-mode autodiff: walks the forward nodes from the start back to the first
 * and appends each one's gradient nodes to the same graph. Gradients that
 * reach a tensor from several consumers are summed by the node that made one of them
 * where it can add (foldGradientSum), else with `add` nodes; parameter
 * gradients accumulate into their gradient tensors (f32 whatever the parameters'
 * dtype, zeroed before the step).
 */
export function appendBackward(g: Graph, start: BackwardStart): BackwardResult {
  const end = "lossNode" in start ? start.lossNode : start.before;
  const requires = tensorsRequiringGrad(g, end);
  const contributions = new Map<number, number[]>();
  const paramGrads = new Map<number, number>("paramGrads" in start ? start.paramGrads : []);
  if ("grads" in start) for (const [id, grad] of start.grads) contributions.set(id, [grad]);
  const unusedGrads = new Map<number, number>();

  const builder: BackwardBuilder = {
    graph: g,
    needsGrad: (id) => requires.has(id),
    addGrad(id, grad) {
      if (!requires.has(id)) return;
      const list = contributions.get(id);
      if (list) list.push(grad);
      else contributions.set(id, [grad]);
    },
    paramGrad(id) {
      // A frozen parameter's gradient, where a kernel makes it beside others (a norm's
      // dWeight beside its dX), lands in an activation nothing reads.
      if (g.info(id).frozen) {
        let sink = unusedGrads.get(id);
        if (sink === undefined) {
          sink = g.tensor(g.info(id).shape, "f32", "activation", `unused grad(${g.info(id).name})`);
          unusedGrads.set(id, sink);
        }
        return sink;
      }
      let grad = paramGrads.get(id);
      if (grad === undefined) {
        grad = paramGradTensor(g, id);
        paramGrads.set(id, grad);
      }
      return grad;
    },
    activation: (shape, like, name) => g.tensor(shape, g.info(like).dtype, "activation", name),
  };

  /** The single gradient of `id`: the sum of every contribution. */
  const gradientOf = (id: number): number | undefined => {
    const list = contributions.get(id);
    if (!list || list.length === 0) return undefined;
    let total = list[0];
    for (let i = 1; i < list.length; i++) {
      const folded = foldGradientSum(g, total, list[i]);
      if (folded !== undefined) {
        total = folded;
        continue;
      }
      const sum = g.tensor(g.info(id).shape, g.info(id).dtype, "activation", `d(${g.info(id).name})`);
      addKernelNode(g, "add", { a: total, b: list[i], out: sum }, { n: g.elements(id), dtype: g.info(id).dtype });
      total = sum;
    }
    contributions.set(id, [total]);
    return total;
  };

  g.asBackward(() => {
    if ("lossNode" in start) {
      const lossNode = g.nodes[start.lossNode];
      const rule = gradRules[(lossNode.attrs as unknown as KernelNodeAttrs).grad ?? ""];
      if (!rule) throw new Error(`node ${start.lossNode} (${(lossNode.attrs as unknown as KernelNodeAttrs).kernel}) cannot start a backward pass`);
      g.withScope(lossNode.scope, () => rule(lossNode, builder, []));
    }
    for (let i = end - 1; i >= 0; i--) {
      const node = g.nodes[i];
      const name = (node.attrs as unknown as KernelNodeAttrs).grad;
      if (!name) continue;
      const outGrads = node.outputs.map((o) => (requires.has(o) ? gradientOf(o) : undefined));
      if (outGrads.every((x) => x === undefined)) continue;
      const r = gradRules[name];
      if (!r) throw new Error(`no gradient rule "${name}"`);
      g.withScope(node.scope, () => r(node, builder, outGrads));
    }
  });
  return { paramGrads };
}

/** Parameters not frozen, and every output of a differentiable node that reads one, before node `end`. */
function tensorsRequiringGrad(g: Graph, end: number): Set<number> {
  const requires = new Set<number>();
  for (const t of g.tensors) if (t.kind === "param" && !t.frozen) requires.add(t.id);
  for (let i = 0; i < end; i++) {
    const node = g.nodes[i];
    if (!(node.attrs as unknown as KernelNodeAttrs).grad) continue;
    if (node.inputs.some((t) => requires.has(t))) for (const o of node.outputs) requires.add(o);
  }
  return requires;
}
