import { type Backend, type BufferHandle, type KernelGraph, type Operand, bytesPerElement } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import { type KernelNodeAttrs, compileKernelNode } from "../graph/kernel-node.js";
import type { CompileContext, RuntimeScalars } from "../graph/op.js";
import type { StepPlan } from "../plan/plan-step.js";
import { type StepProfiler, describeKernelArgs, kernelNodeCost } from "./step-profiler.js";

/** Graphs of a step kept at once (runAsGraph), one per set of runtime scalars. */
const GRAPHS_KEPT = 4;
/** Recordings in a row never launched again after which runAsGraph issues calls one by one. */
const GRAPH_MISSES_TO_GIVE_UP = 8;

/** Where parameters and their gradients live: shared by every step compiled for a model. */
export interface ParameterBinding {
  params: BufferHandle;
  /** Parameter name -> byte offset in `params`. */
  offsets: ReadonlyMap<string, number>;
  /** The f32 gradients whatever the parameters' dtype, with their offsets (the f32 layout's). */
  grads?: { buffer: BufferHandle; offsets: ReadonlyMap<string, number> };
}

/**
 * A planned graph bound to a backend: its buffers allocated once and every node
 * turned into a kernel call with resolved operands. `run()` replays the calls
 * and allocates nothing. With `sharedArena` (another step's arena, at least as
 * large as this plan's), the activations live there instead of in an arena of
 * its own: the two steps must never run interleaved, since each overwrites the
 * other's activations.
 */
export class CompiledStep {
  readonly runtime: RuntimeScalars = { lossScale: 1, auxScale: 0, loadBalanceAlpha: 0, dropoutSeed: 0 };
  /** calls[i]: the kernel call of node i. */
  private readonly calls: (() => void)[];
  /** The activation arena: this step's own, or the one it shares. */
  readonly arena: BufferHandle | undefined;
  private readonly io: BufferHandle | undefined;
  private readonly owned: BufferHandle[] = [];
  /** Recorded graphs of the step's calls by the runtime scalars they read (runAsGraph), oldest first. */
  private readonly graphs = new Map<string, KernelGraph>();
  private graphMisses = 0;

  constructor(
    readonly graph: Graph,
    readonly plan: StepPlan,
    private readonly backend: Backend,
    private readonly parameters: ParameterBinding,
    sharedArena?: BufferHandle,
  ) {
    const ioBytes = plan.inputBytes + plan.constantBytes + plan.outputBytes;
    if (sharedArena && sharedArena.byteLength < plan.arena.bytes) {
      throw new Error(`a shared arena of ${sharedArena.byteLength} bytes is smaller than the ${plan.arena.bytes} bytes this step plans`);
    }
    if (sharedArena && plan.arena.bytes > 0) this.arena = sharedArena;
    else if (plan.arena.bytes > 0) this.owned.push((this.arena = backend.alloc(plan.arena.bytes)));
    if (ioBytes > 0) this.owned.push((this.io = backend.alloc(ioBytes)));
    const ctx: CompileContext = {
      graph,
      kernels: backend.kernels,
      ...(backend.prepare ? { prepare: backend.prepare.bind(backend) } : {}),
      ...(backend.reserveScratch ? { reserveScratch: backend.reserveScratch.bind(backend) } : {}),
      runtime: this.runtime,
      operand: (id, elementOffset = 0) => this.operand(id, elementOffset),
    };
    this.calls = graph.nodes.map((node) => compileKernelNode(node, ctx));
  }

  /** Bytes this step allocated on the backend (its own arena, if any, + inputs, constants, outputs). */
  get allocatedBytes(): number {
    return this.owned.reduce((s, b) => s + b.byteLength, 0);
  }

  /** The operand of tensor `id`, `elementOffset` elements in. */
  operand(id: number, elementOffset = 0): Operand {
    const t = this.graph.info(id);
    const extra = elementOffset * bytesPerElement(t.dtype);
    const at = (buffer: BufferHandle | undefined, offset: number | undefined): Operand => {
      if (!buffer || offset === undefined) throw new Error(`tensor ${t.name} has no place in this step`);
      return { buffer, byteOffset: offset + extra };
    };
    switch (t.kind) {
      case "activation":
        return at(this.arena, this.plan.arena.offsets.get(id));
      case "input":
        return at(this.io, this.plan.inputs.get(id));
      case "constant":
        return at(this.io, this.plan.inputBytes + (this.plan.constants.get(id) ?? NaN));
      case "output":
        return at(this.io, this.plan.inputBytes + this.plan.constantBytes + (this.plan.outputs.get(id) ?? NaN));
      case "param":
        return at(this.parameters.params, this.parameters.offsets.get(t.name));
      case "grad":
        return at(this.parameters.grads?.buffer, this.parameters.grads?.offsets.get(this.graph.info(t.gradOf!).name));
    }
  }

  /** Copies host data into an input or constant tensor. */
  upload(id: number, data: ArrayBufferView): void {
    this.backend.upload(this.operand(id), data);
  }

  /** Issues every kernel call of the step, in order. */
  run(): void {
    for (const call of this.calls) call();
  }

  /**
   * Runs the step's calls as one recorded graph of the backend's (`backend.graphs`):
   * recorded at the first run with given runtime scalars (the loss scale the calls
   * read), launched as a whole at every later run with the same ones. A graph the
   * backend calls stale is recorded again. Returns false, having issued the calls one
   * by one instead, when the backend records no graphs or the scalars keep changing
   * (GRAPH_MISSES_TO_GIVE_UP recordings in a row never launched again).
   */
  runAsGraph(): boolean {
    const graphs = this.backend.graphs;
    if (!graphs || this.graphMisses >= GRAPH_MISSES_TO_GIVE_UP) {
      this.run();
      return false;
    }
    const key = `${this.runtime.lossScale} ${this.runtime.auxScale} ${this.runtime.loadBalanceAlpha} ${this.runtime.dropoutSeed}`;
    const cached = this.graphs.get(key);
    if (cached && graphs.launch(cached)) {
      this.graphMisses = 0;
      return true;
    }
    if (cached) graphs.release(cached);
    this.graphs.delete(key);
    this.graphMisses++;
    graphs.begin();
    try {
      this.run();
    } catch (err) {
      // End the recording (its own failure, if any, is a consequence of this one) and report the call's.
      try {
        graphs.release(graphs.end());
      } catch {}
      throw err;
    }
    const graph = graphs.end();
    // Keep the last few: a loss scale that changes now and then (f16, ignored targets) records anew.
    if (this.graphs.size >= GRAPHS_KEPT) {
      const [oldestKey, oldest] = this.graphs.entries().next().value!;
      graphs.release(oldest);
      this.graphs.delete(oldestKey);
    }
    if (graphs.launch(graph)) {
      this.graphs.set(key, graph);
      return true;
    }
    // Stale at once: a kernel's scratch memory moved while recording (its first run at this size).
    graphs.release(graph);
    this.run();
    return false;
  }

  /** Issues the kernel calls of nodes [fromNode, toNode), in order: a step run in parts (gradient buckets handed off between them). */
  runNodes(fromNode: number, toNode: number): void {
    const end = Math.min(toNode, this.calls.length);
    for (let i = Math.max(0, fromNode); i < end; i++) this.calls[i]();
  }

  /**
   * Replaces every call with one timed through `profiler` as a call of its node's
   * kernel, in the forward or backward region, with the contract's FLOP and byte counts.
   * Only a profiled run does this: an unprofiled step keeps its bare calls.
   */
  instrument(profiler: StepProfiler): void {
    this.graph.nodes.forEach((node, n) => {
      const attrs = node.attrs as unknown as KernelNodeAttrs;
      const kernel = attrs.kernel;
      const region = node.backward ? "backward" : "forward";
      const cost = kernelNodeCost(attrs);
      const args = describeKernelArgs(attrs.args);
      const call = this.calls[n];
      this.calls[n] = () => profiler.time(call, kernel, region, cost, args);
    });
  }

  /**
   * Issues every call, waiting for the device after each one: a profiled step on
   * an asynchronous backend, whose calls return before the kernel has run.
   */
  async runSynchronized(profiler: StepProfiler, synchronize: () => Promise<void>): Promise<void> {
    for (const call of this.calls) {
      call();
      await synchronize();
      profiler.settleLastKernel();
    }
  }

  /** Copies an output tensor back to the host. */
  download(id: number, out: ArrayBufferView): Promise<void> {
    return this.backend.download(this.operand(id), out);
  }

  dispose(): void {
    for (const g of this.graphs.values()) this.backend.graphs?.release(g);
    this.graphs.clear();
    for (const b of this.owned.splice(0)) this.backend.free(b);
  }
}
