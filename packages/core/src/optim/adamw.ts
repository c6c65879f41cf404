import { type AdamWArgs, type Backend, type BufferHandle, bytesPerElement } from "@kiln/contract";
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
 *
 * Sharded (ZeRO stage 1), it updates only the state elements [first, end) this rank owns:
 * the gradients are still the whole f32 layout, m, v and the masters hold the owned
 * elements alone (from element `first` at byte 0), and the 16-bit parameters it rounds into
 * are, when `paramsInStateOrder` is set, that buffer of 16-bit values in state-layout order
 * (what the all-gather then spreads), else the parameters themselves.
 */
export class AdamW {
  private readonly calls: AdamWArgs[] = [];

  constructor(
    private readonly backend: Backend,
    layout: ParamLayout,
    stateLayout: ParamLayout,
    buffers: { params: BufferHandle; grads: BufferHandle; m: BufferHandle; v: BufferHandle; master?: BufferHandle },
    config: AdamWConfig,
    shard?: { first: number; end: number; paramsInStateOrder?: BufferHandle },
  ) {
    const mixed = layout.dtype !== "f32";
    if (mixed !== (buffers.master !== undefined) || stateLayout.dtype !== "f32") throw new Error("AdamW takes f32 parameters, or 16-bit ones with f32 master weights");
    const width = bytesPerElement(layout.dtype);
    const [first, end] = shard ? [shard.first, shard.end] : [0, Infinity];
    for (const run of paramRuns([layout, stateLayout], (a, b) => a.decay === b.decay)) {
      // The run's state elements [e0, e0 + n), cut to the owned ones [a, b).
      const e0 = stateLayout.offsets.get(run.first.name)! / 4;
      const a = Math.max(e0, first);
      const b = Math.min(e0 + run.n, end);
      if (a >= b) continue;
      const own = 4 * (a - first);
      const param = shard?.paramsInStateOrder
        ? { buffer: shard.paramsInStateOrder, byteOffset: width * a }
        : { buffer: buffers.params, byteOffset: layout.offsets.get(run.first.name)! + width * (a - e0) };
      this.calls.push({
        param,
        grad: { buffer: buffers.grads, byteOffset: 4 * a },
        m: { buffer: buffers.m, byteOffset: own },
        v: { buffer: buffers.v, byteOffset: own },
        ...(buffers.master ? { master: { buffer: buffers.master, byteOffset: own }, gradDtype: "f32" as const } : {}),
        n: b - a,
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
