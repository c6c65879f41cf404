import type { Backend, BufferHandle, CastArgs } from "@kiln/contract";
import type { ParamLayout } from "../model/param-layout.js";
import { paramRuns } from "../model/param-runs.js";

/**
 * f32 master weights beside the 16-bit parameters of a bf16 or f16 training step:
 * what AdamW updates (from the f32 gradients the step sums). The 16-bit parameters
 * are always the masters rounded to nearest even. The cast arguments are built once.
 */
export class MasterWeights {
  /** f32 master weights, in the f32 layout. */
  readonly master: BufferHandle;
  private readonly toParams: CastArgs[] = [];

  constructor(
    private readonly backend: Backend,
    readonly layout: ParamLayout,
    readonly stateLayout: ParamLayout,
    params: BufferHandle,
  ) {
    const dtype = layout.dtype;
    if (dtype === "f32" || stateLayout.dtype !== "f32") throw new Error("master weights pair a 16-bit layout with an f32 one");
    this.master = backend.alloc(stateLayout.bytes);
    // One cast per run of parameters back to back in both layouts (all of them, when no padding falls between).
    for (const run of paramRuns([layout, stateLayout])) {
      const src = { buffer: this.master, byteOffset: stateLayout.offsets.get(run.first.name)! };
      const dst = { buffer: params, byteOffset: layout.offsets.get(run.first.name)! };
      this.toParams.push({ src, dst, n: run.n, srcDtype: "f32", dstDtype: dtype });
    }
  }

  /** Device bytes this holds. */
  get allocatedBytes(): number {
    return this.master.byteLength;
  }

  /** Rounds every master weight into the parameters. */
  roundToParams(): void {
    for (const args of this.toParams) this.backend.kernels.cast(args);
  }

  dispose(): void {
    this.backend.free(this.master);
  }
}
