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
 * decays). m and v are f32 buffers with the f32 layout of the parameters. Argument
 * objects are built once and reused.
 */
export class AdamW {
  private readonly calls: AdamWArgs[] = [];

  constructor(
    private readonly backend: Backend,
    layout: ParamLayout,
    stateLayout: ParamLayout,
    buffers: { params: BufferHandle; grads: BufferHandle; m: BufferHandle; v: BufferHandle },
    config: AdamWConfig,
  ) {
    for (const run of paramRuns([layout, stateLayout], (a, b) => a.decay === b.decay)) {
      const off = layout.offsets.get(run.first.name)!;
      const stateOff = stateLayout.offsets.get(run.first.name)!;
      this.calls.push({
        param: { buffer: buffers.params, byteOffset: off },
        grad: { buffer: buffers.grads, byteOffset: off },
        m: { buffer: buffers.m, byteOffset: stateOff },
        v: { buffer: buffers.v, byteOffset: stateOff },
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
