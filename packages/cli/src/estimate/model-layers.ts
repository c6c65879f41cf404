import { type ModelConfig, attentionWindow, mamba3Of, mambaOf, mlaOf, moeOf } from "@kiln/core";

/** What a model's layers are beyond dense attention: its Mamba, latent attention, sliding-window and expert parts ("" for none); kiln train's banner and kiln estimate show it. */
export function modelLayersOf(m: ModelConfig): string {
  return `${mambaLayersOf(m)}${latentAttentionOf(m)}${slidingWindowOf(m)}${expertsOf(m)}`;
}

/** ", sliding window 512 in 22 of 26 layers" (or "in every layer"), else "". */
function slidingWindowOf(m: ModelConfig): string {
  if (m.slidingWindow === undefined) return "";
  const mamba = mambaOf(m);
  const sliding = Array.from({ length: m.numLayers }, (_, i) => i).filter((i) => !mamba?.layers.has(i) && attentionWindow(m, i) !== undefined).length;
  return sliding === 0 ? "" : `, sliding window ${m.slidingWindow} in ${sliding === m.numLayers ? "every layer" : `${sliding} of ${m.numLayers} layers`}`;
}

/** ", latent attention (kv 32, q 48, rope 8)" for multi-head latent attention, else "". */
function latentAttentionOf(m: ModelConfig): string {
  const mla = mlaOf(m);
  return mla ? `, latent attention (kv ${mla.kvLatent}${mla.qLatent ? `, q ${mla.qLatent}` : ""}, rope ${mla.rope})` : "";
}

/**
 * ", Mamba2 in 8 of 10 layers (16 heads of 64, state 64, chunks of 64)" for a model with Mamba2
 * layers, ", Mamba3 SISO with complex RoPE in 6 of 8 layers (…)" (or "MIMO rank 4", "no RoPE",
 * "with conv") for Mamba3, else "".
 */
function mambaLayersOf(m: ModelConfig): string {
  const mamba = mambaOf(m);
  if (!mamba) return "";
  const m3 = mamba3Of(m);
  const kind = m3 ? `Mamba3 ${m3.mimoRank > 0 ? `MIMO rank ${m3.mimoRank}` : "SISO"}${m3.rope ? " with complex RoPE" : ", no RoPE"}${m3.useConv ? ", with conv" : ""}` : "Mamba2";
  return `, ${kind} in ${mamba.layers.size} of ${m.numLayers} layers (${mamba.heads} heads of ${mamba.headDim}, state ${mamba.stateSize}, chunks of ${mamba.chunkSize})`;
}

/** ", 4 experts (top 2, shared expert)" for a mixture-of-experts model, else "". */
function expertsOf(m: ModelConfig): string {
  const moe = moeOf(m);
  return moe ? `, ${moe.numExperts} experts (top ${moe.topK}${moe.shared ? ", shared expert" : ""})` : "";
}
