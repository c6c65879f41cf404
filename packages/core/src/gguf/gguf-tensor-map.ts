import type { GgufValue } from "./gguf-format.js";

/**
 * How a kiln parameter becomes a GGUF tensor, and back:
 *   copy:      the same values; GGUF's rows are kiln's rows (kiln stores Linear weights (out, in));
 *   ropeRows:  a q or k projection's rows reordered for llama.cpp's Llama RoPE (interleaveRopeRows);
 *   transpose: kiln stores the matrix (in, out), as GPT-2's Conv1D does; GGUF's rows are outputs;
 *   plusOne:   GGUF holds 1 + w (Gemma's norms, which scale by 1 + w).
 */
export type GgufTransform = { kind: "copy" } | { kind: "ropeRows"; heads: number } | { kind: "transpose" } | { kind: "plusOne" };

/** One tensor of an architecture's GGUF file and the kiln parameter it holds. */
export interface GgufTensorRule {
  /** llama.cpp's tensor name (token_embd.weight, blk.3.attn_q.weight, ...). */
  gguf: string;
  /** The kiln (Hugging Face) parameter name. */
  kiln: string;
  /** The kiln parameter's shape. */
  shape: number[];
  transform: GgufTransform;
  /** 1-D tensors (norms, biases, factors) stay f32 whatever the file's type, as llama.cpp's converter keeps them. */
  keepF32: boolean;
}

/** A tensor computed from the parameters (`get` reads one by kiln name). */
export interface GgufDerivedTensor {
  name: string;
  ne: number[];
  keepF32: boolean;
  values(get: (kiln: string) => Float32Array): Float32Array;
}

/** An architecture in GGUF terms: llama.cpp's architecture name, its hyperparameter keys, its tensors. */
export interface GgufModel {
  arch: string;
  metadata: [string, GgufValue][];
  tensors: GgufTensorRule[];
  /** Tensors llama.cpp wants that kiln derives (Llama 3's rope_freqs, GPT-2's tied output): written, not read back. */
  derived: GgufDerivedTensor[];
  /** What a user should know about the file (a limit llama.cpp puts on it). */
  notes: string[];
}

export const u32 = (value: number): GgufValue => ({ type: "u32", value });
export const f32 = (value: number): GgufValue => ({ type: "f32", value });
export const str = (value: string): GgufValue => ({ type: "string", value });

/** ggml's ne of a rule's tensor: a row's length first (kiln's shape reversed, or kept for a transposed matrix). */
export function ggufShape(rule: GgufTensorRule): number[] {
  return rule.transform.kind === "transpose" ? [...rule.shape] : [...rule.shape].reverse();
}

/**
 * Rows of a q or k projection (heads x D, C) from Hugging Face's RoPE layout (rotate_half:
 * the pairs are (i, i + D/2)) to llama.cpp's Llama layout (the pairs adjacent: (2i, 2i + 1)):
 * within each head, row i of the first half goes to 2i, row i of the second half to 2i + 1.
 * `inverse` undoes it.
 */
export function interleaveRopeRows(w: Float32Array, heads: number, cols: number, inverse = false): Float32Array {
  const rows = w.length / cols, D = rows / heads, half = D / 2;
  const out = new Float32Array(w.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (const [hf, gg] of [[i, 2 * i], [half + i, 2 * i + 1]]) {
        const [from, to] = inverse ? [gg, hf] : [hf, gg];
        out.set(w.subarray((h * D + from) * cols, (h * D + from + 1) * cols), (h * D + to) * cols);
      }
    }
  }
  return out;
}

function transpose(w: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(w.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = w[r * cols + c];
  return out;
}

/** A kiln parameter's values as the rule's GGUF tensor holds them. */
export function toGguf(rule: GgufTensorRule, w: Float32Array): Float32Array {
  const t = rule.transform;
  const cols = rule.shape.length === 1 ? 1 : rule.shape[rule.shape.length - 1];
  if (t.kind === "ropeRows") return interleaveRopeRows(w, t.heads, cols);
  if (t.kind === "transpose") return transpose(w, rule.shape[0], rule.shape[1]);
  if (t.kind === "plusOne") return Float32Array.from(w, (x) => x + 1);
  return w;
}

/** The kiln parameter's values from the rule's GGUF tensor. */
export function fromGguf(rule: GgufTensorRule, g: Float32Array): Float32Array {
  const t = rule.transform;
  const cols = rule.shape.length === 1 ? 1 : rule.shape[rule.shape.length - 1];
  if (t.kind === "ropeRows") return interleaveRopeRows(g, t.heads, cols, true);
  if (t.kind === "transpose") return transpose(g, rule.shape[1], rule.shape[0]);
  if (t.kind === "plusOne") return Float32Array.from(g, (x) => x - 1);
  return g;
}
