import { type FloatDType, bytesPerElement } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import { alignUp } from "../plan/pack-arena.js";
import { ARCHITECTURES } from "./architectures.js";
import type { ModelConfig } from "./config.js";

/**
 * How a parameter starts: N(0, std^2), all ones, all zeros, or Mamba2's per-head
 * inits: ssmDecayLog = log(U(1, 16)) (A = -exp of it), ssmTimeStepBias = softplus⁻¹(dt)
 * with dt log-uniform in [0.001, 0.1] (floored at 1e-4).
 */
export type ParamInit = { kind: "normal"; std: number } | { kind: "ones" } | { kind: "zeros" } | { kind: "ssmDecayLog" } | { kind: "ssmTimeStepBias" };

export interface ParamSpec {
  /** Hugging Face tensor name. */
  name: string;
  shape: number[];
  /** Weight decay applies (matrices); not to norms, biases and embeddings. */
  decay: boolean;
  init: ParamInit;
}

/** Every parameter of a model, in a fixed order, with byte offsets in one flat buffer. */
export interface ParamLayout {
  /** The model's parameters in its own (Hugging Face) order: init, checkpoints and exports follow it. */
  specs: ParamSpec[];
  /**
   * The same parameters in buffer order: those with weight decay first, then the
   * others, each group in spec order, so that AdamW covers each group with few calls
   * (gpt2-small: 2 instead of 97), breaking only where alignment padding lies between.
   */
  stored: ParamSpec[];
  offsets: Map<string, number>;
  dtype: FloatDType;
  /** Bytes of the flat buffer (each parameter 64-byte aligned). */
  bytes: number;
  /** Total parameter count. */
  count: number;
}

/** The parameters of `config`, laid out in one flat buffer of `dtype`. */
export function paramLayout(config: ModelConfig, dtype: FloatDType = "f32"): ParamLayout {
  const specs = ARCHITECTURES[config.arch].params(config);
  const stored = [...specs.filter((s) => s.decay), ...specs.filter((s) => !s.decay)];
  const offsets = new Map<string, number>();
  let bytes = 0;
  let count = 0;
  for (const s of stored) {
    offsets.set(s.name, bytes);
    const n = elementCount(s.shape);
    count += n;
    bytes += alignUp(n * bytesPerElement(dtype));
  }
  return { specs, stored, offsets, dtype, bytes, count };
}
