import { CheckpointError } from "@kiln/contract";
import type { ModelConfig } from "../model/config.js";
import { gemma3Gguf } from "./gguf-gemma3.js";
import { gpt2Gguf } from "./gguf-gpt2.js";
import { isLlamaLike, llamaLikeGguf } from "./gguf-llama-family.js";
import type { GgufModel } from "./gguf-tensor-map.js";

/** The layer kind of `m` kiln's GGUF writer does not map to a llama.cpp architecture yet, if any. */
function unsupportedLayers(m: ModelConfig): string | undefined {
  if (m.kvLatentDim) return "multi-head latent attention";
  if (m.mambaLayers?.length) return "Mamba layers";
  return undefined;
}

/**
 * The llama.cpp architecture of a kiln model: its keys and the tensor mapping both ways
 * (export writes with it, kiln sample reads a file back with it). Layer kinds not mapped
 * yet are refused by name.
 */
export function ggufModelOf(m: ModelConfig, where: string): GgufModel {
  const layers = unsupportedLayers(m);
  if (layers) {
    throw new CheckpointError(`kiln does not write ${layers} as GGUF yet; this checkpoint has them`, {
      where,
      hint: "export a Hugging Face folder instead (kiln export --format hf); GGUF for these layers is planned",
    });
  }
  if (m.arch === "gpt2") return gpt2Gguf(m);
  if (m.arch === "gemma3") return gemma3Gguf(m, where);
  if (isLlamaLike(m.arch)) return llamaLikeGguf(m as ModelConfig & { arch: typeof m.arch }, where);
  throw new CheckpointError(`kiln does not write ${m.arch} models as GGUF`, { where, hint: "export a Hugging Face folder instead (kiln export --format hf)" });
}
