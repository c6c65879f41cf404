import { expect, it } from "vitest";
import { type Backend, type KernelName, createReferenceBackend } from "@kiln/contract";
import { CompiledStep } from "../src/exec/compiled-step.js";
import { type KernelNodeAttrs, kernelNodeAttrs } from "../src/graph/kernel-node.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { planTraining } from "../src/train/plan-training.js";

// Kernel scratch is made room for when a step is compiled: the calls the backend prepares
// reserve their own (Backend.prepare), and every other call (those that read a runtime
// scalar at each issue: the loss scale, MoE's load-balancing weight) goes to
// Backend.reserveScratch once, with the scalars as they stand.
it("compiling a step prepares each fixed call and hands each call with runtime scalars to reserveScratch", () => {
  const reference = createReferenceBackend();
  const prepared: KernelName[] = [];
  const reserved: { kernel: KernelName; args: Record<string, unknown> }[] = [];
  const backend = Object.assign(Object.create(reference) as Backend, {
    prepare: (kernel: KernelName, args: never) => (prepared.push(kernel), () => (reference.kernels[kernel] as (a: never) => void)(args)),
    reserveScratch: (kernel: KernelName, args: Record<string, unknown>) => void reserved.push({ kernel, args: { ...args } }),
  });
  const model = resolveModelConfig({ arch: "llama", vocabSize: 24, hiddenSize: 16, numLayers: 1, numHeads: 2, kvHeads: 1, intermediateSize: 12, numExperts: 3, expertsPerToken: 2, maxSeqLen: 8 });
  const { layout, stateLayout, graph, step } = planTraining(model, 2, 8, "f32");
  const params = backend.alloc(layout.bytes);
  const grads = backend.alloc(stateLayout.bytes);
  const compiled = new CompiledStep(graph.graph, step, backend, { params, offsets: layout.offsets, grads: { buffer: grads, offsets: stateLayout.offsets } });

  const attrs = graph.graph.nodes.map((n) => kernelNodeAttrs(n) as KernelNodeAttrs);
  const withRuntime = attrs.filter((a) => a.runtimeArgs && Object.keys(a.runtimeArgs).length > 0);
  expect(withRuntime.map((a) => a.kernel)).toEqual(expect.arrayContaining(["crossEntropyForward", "moeRoute"]));
  expect(reserved.map((r) => r.kernel)).toEqual(withRuntime.map((a) => a.kernel));
  expect(prepared).toHaveLength(attrs.length - withRuntime.length);
  // The runtime scalars are filled in (with the step's current values), not left undefined.
  for (const [i, a] of withRuntime.entries()) {
    for (const key of Object.keys(a.runtimeArgs!)) expect(typeof reserved[i].args[key], `${a.kernel}.${key}`).toBe("number");
  }
  compiled.dispose();
  reference.dispose();
});
