import { type Backend, type BufferHandle, bf16ToF32, f16ToF32 } from "@kiln/contract";
import { CompiledStep } from "../exec/compiled-step.js";
import type { ModelConfig } from "../model/config.js";
import { type ModelGraph, buildEvalGraph, positionIds, positionsInRows } from "../model/build-graph.js";
import type { ParamLayout } from "../model/param-layout.js";
import { planStep } from "../plan/plan-step.js";

/**
 * The forward pass and loss for a fixed (batch, seqLen), over shared parameters:
 * evaluation losses and logits for generation. The logits stay readable after a
 * run: the loss is the only thing computed after them and it lives beside them.
 *
 * Given a trainer's arena (`sharedArena`) at least as large as its own plan's, the
 * runner's activations live there (planForwardMemory counts only its I/O then):
 * the training activations are dead between steps. It then runs between steps,
 * never during one, and a step overwrites the logits of the runner's last run.
 */
export class ForwardRunner {
  private readonly graph;
  private readonly compiled: CompiledStep;
  private readonly lossHost = new Float32Array(1);
  private halfLogits: Uint16Array | undefined;

  constructor(
    backend: Backend,
    readonly model: ModelConfig,
    layout: ParamLayout,
    params: BufferHandle,
    readonly batchSize: number,
    readonly seqLen: number,
    sharedArena?: BufferHandle,
    /** Rows packed with several documents: run() takes their starts. */
    readonly packed = false,
  ) {
    this.graph = buildEvalGraph(model, layout, batchSize, seqLen, packed);
    const plan = planStep(this.graph.graph);
    const shares = sharedArena !== undefined && sharedArena.byteLength >= plan.arena.bytes;
    this.compiled = new CompiledStep(this.graph.graph, plan, backend, { params, offsets: layout.offsets }, shares ? sharedArena : undefined);
    if (this.graph.positions !== undefined && !packed) this.compiled.upload(this.graph.positions, positionIds(batchSize, seqLen));
  }

  /** Device bytes this runner allocated (its I/O, and its arena unless it shares one). */
  get allocatedBytes(): number {
    return this.compiled.allocatedBytes;
  }

  /** Runs the forward pass; returns the summed loss over targets >= 0 (all -1 targets give 0). Packed rows need their docStarts. */
  async run(ids: Int32Array, targets?: Int32Array, docStarts?: Int32Array): Promise<number> {
    uploadDocuments(this.compiled, this.graph, docStarts);
    this.compiled.upload(this.graph.ids, ids);
    this.compiled.upload(this.graph.eval.targets, targets ?? new Int32Array(ids.length).fill(-1));
    this.compiled.run();
    await this.compiled.download(this.graph.eval.lossSum, this.lossHost);
    return this.lossHost[0];
  }

  /** Logits of the last run, (batchSize*seqLen, vocab) row-major, widened to f32 when the runner is 16-bit. */
  async logits(out: Float32Array = new Float32Array(this.batchSize * this.seqLen * this.model.vocabSize)): Promise<Float32Array> {
    const dtype = this.graph.graph.info(this.graph.logits).dtype;
    if (dtype === "f32") {
      await this.compiled.download(this.graph.logits, out);
      return out;
    }
    const half = (this.halfLogits ??= new Uint16Array(out.length));
    await this.compiled.download(this.graph.logits, half);
    const widen = dtype === "bf16" ? bf16ToF32 : f16ToF32;
    for (let i = 0; i < half.length; i++) out[i] = widen(half[i]);
    return out;
  }

  dispose(): void {
    this.compiled.dispose();
  }
}

/** A packed graph's document starts, and its learned positions counted from them, for the next run. */
export function uploadDocuments(compiled: CompiledStep, graph: ModelGraph, docStarts: Int32Array | undefined): void {
  if (graph.docStarts === undefined) return;
  if (docStarts === undefined) throw new Error("a graph of packed rows runs on batches with docStarts");
  compiled.upload(graph.docStarts, docStarts);
  if (graph.positions !== undefined) compiled.upload(graph.positions, positionsInRows(docStarts, graph.seqLen));
}
