import { describe, expect, it } from "vitest";
import type { Backend, KernelGraph } from "@kiln/contract";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { resolveModelConfig } from "../src/model/architectures.js";
import { Trainer, type TrainerConfig } from "../src/train/trainer.js";
import { constantLrConfig } from "./support/trainer-config.js";

// kernelGraphs: each micro-batch's forward and backward recorded once as a kernel graph
// (CUDA graphs; the simulator records the launches and runs them again) and launched
// whole afterwards. The training must be the same, bit for bit, as call by call.
const sim = cudaStatus().simulator;

/** The simulator backend, counting what its graphs do. */
function countingBackend() {
  const backend = createCudaSimBackend();
  const counts = { recorded: 0, launched: 0, stale: 0 };
  const graphs = backend.graphs!;
  const counted: Backend = Object.assign(Object.create(backend) as Backend, {
    graphs: {
      begin: () => graphs.begin(),
      end: () => (counts.recorded++, graphs.end()),
      launch: (g: KernelGraph) => {
        const ran = graphs.launch(g);
        counts[ran ? "launched" : "stale"]++;
        return ran;
      },
      release: (g: KernelGraph) => graphs.release(g),
    },
  });
  return { backend: counted, counts, dispose: () => backend.dispose() };
}

const config = (dtype: "f32" | "f16", kernelGraphs: boolean): TrainerConfig => ({
  ...constantLrConfig(resolveModelConfig({ arch: "gpt2", vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, maxSeqLen: 16 }), 2, 16, 3),
  dtype,
  kernelGraphs,
});

const batch = (seed: number, ignored = 0) => ({
  ids: Int32Array.from({ length: 32 }, (_, i) => (i * 7 + seed) % 40),
  targets: Int32Array.from({ length: 32 }, (_, i) => (i < ignored ? -1 : (i * 7 + seed + 1) % 40)),
});

if (!sim.built) {
  it.skip(`kernel graphs on cuda-sim: ${sim.detail}`, () => {});
} else {
  describe.each(["f32", "f16"] as const)("%s training with kernel graphs on cuda-sim", (dtype) => {
    it("trains bit for bit as call by call, launching recorded graphs from the second micro-batch on", async () => {
      const plain = countingBackend();
      const graphed = countingBackend();
      const a = new Trainer(plain.backend, config(dtype, false));
      const b = new Trainer(graphed.backend, config(dtype, true));
      for (let step = 0; step < 5; step++) {
        // Two micro-batches a step; at step 3 some targets are ignored (another loss scale: recorded anew).
        const batches = [batch(step, step === 3 ? 5 : 0), batch(step + 10)];
        const [ra, rb] = [await a.step(batches), await b.step(batches)];
        expect(rb.loss, `step ${step}`).toBe(ra.loss);
        expect(rb.gradNorm, `step ${step}`).toBe(ra.gradNorm);
      }
      const [pa, pb] = [await a.readParameters("params"), await b.readParameters("params")];
      for (const [name, values] of pa) expect(Array.from(pb.get(name)!), name).toEqual(Array.from(values));
      expect(plain.counts).toEqual({ recorded: 0, launched: 0, stale: 0 });
      // 10 micro-batches: the first call by call; the rest recorded once per loss scale, the others launched.
      expect(graphed.counts.recorded + graphed.counts.launched).toBeGreaterThanOrEqual(9);
      expect(graphed.counts.launched).toBeGreaterThanOrEqual(5);
      expect(graphed.counts.recorded).toBeLessThanOrEqual(4);
      [a, b].forEach((t) => t.dispose());
      [plain, graphed].forEach((x) => x.dispose());
    }, 240_000);
  });
}
