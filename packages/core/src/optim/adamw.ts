import type { AdamWArgs, Backend, BufferHandle } from "@kiln/contract";
import type { ParamLayout } from "../model/param-layout.js";
import { paramRuns } from "../model/param-runs.js";

export interface AdamWConfig {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

/**
 * AdamW over a flat parameter buffer: one fused kernel call per run of parameters
 * that lie back to back and share their weight decay (decay only where the parameter
 * decays). Gradients, m and v are f32 buffers with the f32 layout of the parameters.
 * With 16-bit parameters, `master` holds their f32 master weights (f32 layout): each
 * call updates the masters and rounds them into the parameters in the same pass.
 * Argument objects are built once and reused.
 */
export class AdamW {
  private readonly calls: AdamWArgs[] = [];

  constructor(
    private readonly backend: Backend,
    layout: ParamLayout,
    stateLayout: ParamLayout,
    buffers: { params: BufferHandle; grads: BufferHandle; m: BufferHandle; v: BufferHandle; master?: BufferHandle },
    config: AdamWConfig,
  ) {
    const mixed = layout.dtype !== "f32";
    if (mixed !== (buffers.master !== undefined) || stateLayout.dtype !== "f32") throw new Error("AdamW takes f32 parameters, or 16-bit ones with f32 master weights");
    for (const run of paramRuns([layout, stateLayout], (a, b) => a.decay === b.decay)) {
      const off = layout.offsets.get(run.first.name)!;
      const stateOff = stateLayout.offsets.get(run.first.name)!;
      this.calls.push({
        param: { buffer: buffers.params, byteOffset: off },
        grad: { buffer: buffers.grads, byteOffset: stateOff },
        m: { buffer: buffers.m, byteOffset: stateOff },
        v: { buffer: buffers.v, byteOffset: stateOff },
        ...(buffers.master ? { master: { buffer: buffers.master, byteOffset: stateOff }, gradDtype: "f32" as const } : {}),
        n: run.n,
        lr: 0,
        beta1: config.beta1,
        beta2: config.beta2,
        eps: config.eps,
        weightDecay: run.first.decay ? config.weightDecay : 0,
        step: 1,
        gradScale: 1,
        dtype: layout.dtype,
      });
    }
  }

  /** One update with learning rate `lr`, bias correction for `step` (from 1), gradients scaled by `gradScale`. */
  update(lr: number, step: number, gradScale: number): void {
    for (const args of this.calls) {
      args.lr = lr;
      args.step = step;
      args.gradScale = gradScale;
      this.backend.kernels.adamW(args);
    }
  }
}
