/**
 * The native kernels' addon (native/src/addon.cc, built by scripts/build-native.mjs) as
 * JavaScript sees it. Its functions take a Uint8Array over the WebAssembly memory and
 * byte offsets into it, with the pool calling convention of the wasm kernels.
 */
export interface NativeIsaKernels {
  readonly isa: NativeIsa;
  /** Register tile (MR x NR) and k block of the GEMM. */
  readonly mr: number;
  readonly nr: number;
  readonly kc: number;
  /** Flops of one round of the register-only FMA loop on one thread. */
  readonly ceilingFlopsPerIteration: number;
  /** One part of the matmul whose argument block (csrc/matmul_gemm.h) is at argsPtr; dtype: 0 f32, 1 bf16, 2 f16. */
  matmul(memory: Uint8Array, argsPtr: number, part: number, parts: number, dtype: number): void;
  /** One part of an attention forward / backward (the block of src/attention-dispatch.ts at argsPtr). */
  attentionForward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  attentionBackward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  /** One part of a GELU forward / backward (ActivationArgs of csrc/activation.c at argsPtr). */
  geluForward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  geluBackward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  /** One part of a LayerNorm / RMSNorm forward, or of the backward's rows pass (csrc/norm.c's argument blocks at argsPtr). */
  layerNormForward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  layerNormBackward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  rmsNormForward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  rmsNormBackward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  /** One part of a cross-entropy forward, forward-backward or backward (CrossEntropyArgs of csrc/cross_entropy.c at argsPtr). */
  crossEntropyForward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  crossEntropyForwardBackward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  crossEntropyBackward(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  /** One part of the FMA ceiling (CeilingArgs of csrc/ceiling.c at argsPtr). */
  ceiling(memory: Uint8Array, argsPtr: number, part: number, parts: number): void;
  /** The GEMM's own conversions: 16-bit patterns to f32, and f32 rounded to 16-bit (dtype 1 bf16, 2 f16). */
  widen(input: Uint16Array, output: Float32Array, dtype: number): void;
  narrow(input: Float32Array, output: Uint16Array, dtype: number): void;
}

/** Instruction sets the addon has kernels for, best first (x86-64: AVX-512F, AVX2; arm64: NEON). */
export const NATIVE_ISAS = ["avx512", "avx2", "neon"] as const;
export type NativeIsa = (typeof NATIVE_ISAS)[number];

export interface NativeAddon {
  /** The instruction sets this CPU and build run, best first. */
  isas(): NativeIsa[];
  /** "x64", "arm64", or "other" for a build with no kernels for its CPU. */
  readonly arch: string;
  kernels(isa: NativeIsa): NativeIsaKernels;
}

/** The addon, where it was loaded from; or why there is none. */
export type NativeAddonLoad = { addon: NativeAddon; path: string } | { reason: string };
