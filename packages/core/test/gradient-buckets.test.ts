import { describe, expect, it } from "vitest";
import { resolveModelConfig } from "../src/model/architectures.js";
import { planTraining } from "../src/train/plan-training.js";
import { planGradientBuckets } from "../src/train/gradient-buckets.js";

const model = resolveModelConfig({ arch: "gpt2", vocabSize: 64, hiddenSize: 32, numLayers: 3, numHeads: 2, maxSeqLen: 16 });

describe("planGradientBuckets", () => {
  const { graph, layout } = planTraining(model, 2, 16);
  it.each([1, 4096, 16 * 1024, 1 << 30])("tiles the whole gradient buffer at parameter boundaries (cap %i bytes)", (cap) => {
    const buckets = planGradientBuckets(graph.graph, layout, cap);
    const byOffset = [...buckets].sort((a, b) => a.byteOffset - b.byteOffset);
    let at = 0;
    for (const b of byOffset) {
      expect(b.byteOffset).toBe(at);
      expect(layout.offsets.get(b.params[0])).toBe(b.byteOffset);
      // Over the cap only when one parameter alone is.
      if (b.elements * 4 > cap) expect(b.params.length).toBe(1);
      at += b.elements * 4;
    }
    expect(at).toBe(layout.bytes);
    expect(byOffset.flatMap((b) => b.params)).toEqual(layout.stored.map((s) => s.name));
  });

  it("orders buckets by the node that last writes them, which comes after every writer of theirs", () => {
    const buckets = planGradientBuckets(graph.graph, layout, 4096);
    const ready = buckets.map((b) => b.readyAfterNode);
    expect(ready).toEqual([...ready].sort((a, b) => a - b));
    for (const b of buckets) {
      for (const node of graph.graph.nodes.slice(b.readyAfterNode + 1)) {
        for (const id of node.outputs) {
          const t = graph.graph.info(id);
          if (t.kind === "grad") expect(b.params).not.toContain(graph.graph.info(t.gradOf!).name);
        }
      }
    }
    // The tied embedding's gradient is last written by the embedding backward: the final node to finish.
    expect(buckets.at(-1)!.params).toContain("transformer.wte.weight");
  });

  it("refuses a bucket size that is not positive", () => {
    expect(() => planGradientBuckets(graph.graph, layout, 0)).toThrow(/must be positive, got 0/);
  });
});
