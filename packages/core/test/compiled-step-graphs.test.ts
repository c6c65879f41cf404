import { describe, expect, it } from "vitest";
import { type Backend, type KernelGraph, createReferenceBackend } from "@kiln/contract";
import { CompiledStep } from "../src/exec/compiled-step.js";
import { resolveModelConfig } from "../src/model/architectures.js";
import { planTraining } from "../src/train/plan-training.js";

// CompiledStep.runAsGraph over a stand-in recorder: what it records, launches, records
// again and gives up on, whatever the backend's graphs do underneath.

/** A reference backend with stand-in graphs: a graph is the list of calls made while recording. */
function recordingBackend(options: { failAtCall?: number } = {}) {
  const reference = createReferenceBackend();
  const log = { recorded: 0, launched: 0, released: 0, stale: new Set<number>() };
  let recording: (() => void)[] | undefined;
  const stored = new Map<number, (() => void)[]>();
  let calls = 0;
  let nextId = 0;
  const kernels = new Proxy(reference.kernels, {
    get: (target, name: string) => (args: unknown) => {
      if (++calls === options.failAtCall) throw new Error(`call ${calls} refused`);
      const run = () => (target as unknown as Record<string, (a: unknown) => void>)[name]({ ...(args as object) });
      if (recording) recording.push(run);
      else run();
    },
  });
  const graphs = {
    begin: () => void (recording = []),
    end: (): KernelGraph => {
      const id = ++nextId;
      stored.set(id, recording!);
      recording = undefined;
      log.recorded++;
      return { id };
    },
    launch: (g: KernelGraph) => {
      if (log.stale.has(g.id)) return false;
      stored.get(g.id)!.forEach((run) => run());
      log.launched++;
      return true;
    },
    release: (g: KernelGraph) => void (stored.delete(g.id), log.released++),
  };
  const backend = Object.assign(Object.create(reference) as Backend, { kernels, graphs });
  return { backend, log, isRecording: () => recording !== undefined };
}

function compiledStep(backend: Backend) {
  const model = resolveModelConfig({ arch: "gpt2", vocabSize: 24, hiddenSize: 16, numLayers: 1, numHeads: 2, maxSeqLen: 8 });
  const { layout, stateLayout, graph, step } = planTraining(model, 2, 8, "f32");
  const params = backend.alloc(layout.bytes);
  const grads = backend.alloc(stateLayout.bytes);
  return new CompiledStep(graph.graph, step, backend, { params, offsets: layout.offsets, grads: { buffer: grads, offsets: stateLayout.offsets } });
}

describe("CompiledStep.runAsGraph", () => {
  it("records once per loss scale and launches the recording afterwards; a stale graph is recorded again", () => {
    const { backend, log } = recordingBackend();
    const step = compiledStep(backend);
    step.runtime.lossScale = 0.5;
    expect(step.runAsGraph()).toBe(true);
    expect(step.runAsGraph()).toBe(true);
    expect(log).toMatchObject({ recorded: 1, launched: 2 });
    step.runtime.lossScale = 0.25; // another scale: another graph
    expect(step.runAsGraph()).toBe(true);
    expect(log).toMatchObject({ recorded: 2, launched: 3 });
    log.stale.add(2); // the 0.25 graph goes stale: released, recorded again
    expect(step.runAsGraph()).toBe(true);
    expect(log).toMatchObject({ recorded: 3, launched: 4, released: 1 });
    step.dispose();
    expect(log.released).toBe(3);
  });

  it("issues the calls one by one once the scale has changed at every run for a while", () => {
    const { backend, log } = recordingBackend();
    const step = compiledStep(backend);
    const used = Array.from({ length: 12 }, (_, i) => ((step.runtime.lossScale = 1 / (i + 2)), step.runAsGraph()));
    expect(used.slice(0, 8)).toEqual(Array(8).fill(true));
    expect(used.slice(8)).toEqual(Array(4).fill(false));
    expect(log.recorded).toBe(8);
  });

  it("reports a call that fails while recording, and stops recording", () => {
    const { backend, isRecording } = recordingBackend({ failAtCall: 5 });
    const step = compiledStep(backend);
    expect(() => step.runAsGraph()).toThrow(/call 5 refused/);
    expect(isRecording()).toBe(false);
  });
});
