import type { AddArgs, Backend, BufferHandle, CastArgs } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import type { ParamLayout } from "../model/param-layout.js";

/** Elements cast per call when a micro-batch's 16-bit gradients are added to the f32 sums (1 MiB of f32). */
const GRADIENT_CHUNK = 1 << 18;

/** f32 elements of the scratch that 16-bit gradients are widened into before being added to the f32 sums. */
export function gradientChunkElements(layout: ParamLayout): number {
  return Math.min(GRADIENT_CHUNK, Math.max(...layout.specs.map((s) => elementCount(s.shape))));
}

/**
 * Mixed-precision state beside the 16-bit parameters and gradients of a training
 * step: f32 master weights (what AdamW updates) and f32 gradient sums (what
 * AdamW reads). The 16-bit parameters are always the masters rounded to nearest
 * even; each micro-batch's 16-bit gradients are widened and summed in f32.
 * Every kernel argument object is built once and reused.
 */
export class MasterWeights {
  /** f32 master weights, in the f32 layout. */
  readonly master: BufferHandle;
  /** f32 gradient sums over the micro-batches of a step, in the f32 layout. */
  readonly gradSums: BufferHandle;
  private readonly chunk: BufferHandle;
  private readonly toParams: CastArgs[] = [];
  private readonly firstGrads: CastArgs[] = [];
  private readonly addGrads: [CastArgs, AddArgs][] = [];

  constructor(
    private readonly backend: Backend,
    readonly layout: ParamLayout,
    readonly stateLayout: ParamLayout,
    buffers: { params: BufferHandle; grads: BufferHandle },
  ) {
    const dtype = layout.dtype;
    if (dtype === "f32" || stateLayout.dtype !== "f32") throw new Error("master weights pair a 16-bit layout with an f32 one");
    const width = 2;
    const chunkElements = gradientChunkElements(layout);
    this.master = backend.alloc(stateLayout.bytes);
    this.gradSums = backend.alloc(stateLayout.bytes);
    this.chunk = backend.alloc(chunkElements * 4);
    for (const s of layout.specs) {
      const n = elementCount(s.shape);
      const at16 = layout.offsets.get(s.name)!;
      const at32 = stateLayout.offsets.get(s.name)!;
      this.toParams.push({ src: { buffer: this.master, byteOffset: at32 }, dst: { buffer: buffers.params, byteOffset: at16 }, n, srcDtype: "f32", dstDtype: dtype });
      this.firstGrads.push({ src: { buffer: buffers.grads, byteOffset: at16 }, dst: { buffer: this.gradSums, byteOffset: at32 }, n, srcDtype: dtype, dstDtype: "f32" });
      for (let start = 0; start < n; start += chunkElements) {
        const len = Math.min(chunkElements, n - start);
        const sum = { buffer: this.gradSums, byteOffset: at32 + start * 4 };
        this.addGrads.push([
          { src: { buffer: buffers.grads, byteOffset: at16 + start * width }, dst: this.chunk, n: len, srcDtype: dtype, dstDtype: "f32" },
          { a: sum, b: this.chunk, out: sum, n: len, dtype: "f32" },
        ]);
      }
    }
    // The padding between parameters is never written by a kernel: zero it once so whole-buffer norms see zeros there.
    backend.kernels.fill({ out: this.gradSums, n: stateLayout.bytes / 4, value: 0, dtype: "f32" });
  }

  /** Device bytes this holds (masters, gradient sums and the widening scratch). */
  get allocatedBytes(): number {
    return this.master.byteLength + this.gradSums.byteLength + this.chunk.byteLength;
  }

  /** Rounds every master weight into the 16-bit parameters. */
  roundToParams(): void {
    for (const args of this.toParams) this.backend.kernels.cast(args);
  }

  /** Widens a micro-batch's 16-bit gradients into the f32 sums: overwriting them (`first`) or added to them. */
  collectGradients(first: boolean): void {
    const k = this.backend.kernels;
    if (first) {
      for (const args of this.firstGrads) k.cast(args);
      return;
    }
    for (const [widen, add] of this.addGrads) {
      k.cast(widen);
      k.add(add);
    }
  }

  /** Sets every gradient sum to zero (a step where no micro-batch had a valid target). */
  zeroGradients(): void {
    this.backend.kernels.fill({ out: this.gradSums, n: this.stateLayout.bytes / 4, value: 0, dtype: "f32" });
  }

  dispose(): void {
    this.backend.free(this.master);
    this.backend.free(this.gradSums);
    this.backend.free(this.chunk);
  }
}
