import { type BufferHandle, type BufferSlice, type FloatDType, bytesPerElement } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import { alignUp } from "../plan/pack-arena.js";
import { ARCHITECTURES, archOf } from "./architectures.js";
import { withLowRankAdapters } from "./low-rank-adapters.js";
import type { ModelConfig } from "./config.js";

/**
 * How a parameter starts: N(0, std^2), U(-bound, bound), all ones, all zeros, or Mamba2's per-head
 * inits: ssmDecayLog = log(U(1, 16)) (A = -exp of it), ssmTimeStepBias = softplus⁻¹(dt)
 * with dt log-uniform in [0.001, 0.1] (floored at 1e-4).
 */
export type ParamInit = { kind: "normal"; std: number } | { kind: "uniform"; bound: number } | { kind: "ones" } | { kind: "zeros" } | { kind: "ssmDecayLog" } | { kind: "ssmTimeStepBias" };

export interface ParamSpec {
  /** Hugging Face tensor name. */
  name: string;
  shape: number[];
  /** Weight decay applies (matrices); not to norms, biases and embeddings. */
  decay: boolean;
  init: ParamInit;
  /** Not trained (a LoRA run's base weights): no gradient, no optimizer state, no f32 master copy. */
  frozen?: boolean;
}

/** Every parameter of a model, in a fixed order, with byte offsets in one flat buffer. */
export interface ParamLayout {
  /** The model's parameters in its own (Hugging Face) order: init, checkpoints and exports follow it. */
  specs: ParamSpec[];
  /**
   * The same parameters in buffer order: the trained ones with weight decay first, then the
   * other trained ones, then the frozen ones, each group in spec order, so that AdamW covers
   * each group with few calls (gpt2-small: 2 instead of 97), breaking only where alignment
   * padding lies between, and the trained parameters are a prefix of the buffer
   * (trainableLayout: what gradients, optimizer state and master weights cover).
   */
  stored: ParamSpec[];
  offsets: Map<string, number>;
  dtype: FloatDType;
  /** Bytes of the flat buffer (each parameter 64-byte aligned). */
  bytes: number;
  /** Total parameter count. */
  count: number;
}

/**
 * The parameters of `config` (with its LoRA adapters, the base frozen), laid out in one flat buffer of
 * `dtype`, each parameter `align`-byte aligned (default 64).
 */
export function paramLayout(config: ModelConfig, dtype: FloatDType = "f32", align?: number): ParamLayout {
  const base = ARCHITECTURES[config.arch].params(config);
  const specs = config.lora ? withLowRankAdapters(base, config.lora, archOf(config).linearLayout) : base;
  const trained = specs.filter((s) => !s.frozen);
  const frozen = specs.filter((s) => s.frozen);
  const stored = [...trained.filter((s) => s.decay), ...trained.filter((s) => !s.decay), ...frozen];
  return layoutOf(specs, stored, dtype, align);
}

/**
 * The trained parameters of `layout` alone, at the same offsets (they are its buffer's
 * prefix): the layout of gradients, AdamW's m and v and the f32 master weights. Without
 * frozen parameters, the same layout.
 */
export function trainableLayout(layout: ParamLayout): ParamLayout {
  if (!layout.specs.some((s) => s.frozen)) return layout;
  return layoutOf(
    layout.specs.filter((s) => !s.frozen),
    layout.stored.filter((s) => !s.frozen),
    layout.dtype,
  );
}

function layoutOf(specs: ParamSpec[], stored: ParamSpec[], dtype: FloatDType, align?: number): ParamLayout {
  const offsets = new Map<string, number>();
  let bytes = 0;
  let count = 0;
  for (const s of stored) {
    offsets.set(s.name, bytes);
    const n = elementCount(s.shape);
    count += n;
    bytes += alignUp(n * bytesPerElement(dtype), align);
  }
  return { specs, stored, offsets, dtype, bytes, count };
}

/**
 * Whether every trained parameter of a 16-bit `layout` lies at half its offset in the f32
 * `stateLayout` (a 16-bit layout aligned to half the f32 one's bytes: paramLayout(config, dtype, 32)),
 * so the 16-bit trained parameters are the state layout's elements in its order, 2 bytes each.
 */
export function halvesStateOffsets(layout: ParamLayout, stateLayout: ParamLayout): boolean {
  return layout.dtype !== "f32" && stateLayout.stored.every((s) => 2 * layout.offsets.get(s.name)! === stateLayout.offsets.get(s.name));
}

/** Where one parameter's values lie in a device buffer, and their dtype there. */
export interface ParamSlot {
  spec: ParamSpec;
  at: BufferSlice;
  dtype: FloatDType;
}

/** Every parameter of `layout` in `buffer` (laid out as `layout` says), in the model's order. */
export function slotsOf(layout: ParamLayout, buffer: BufferHandle): ParamSlot[] {
  return layout.specs.map((spec) => ({ spec, at: { buffer, byteOffset: layout.offsets.get(spec.name)! }, dtype: layout.dtype }));
}
