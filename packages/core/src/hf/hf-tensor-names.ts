import type { ModelConfig } from "../model/config.js";

const GPT2_PREFIX = "transformer.";

/** Buffers transformers may save beside the parameters (attention masks, RoPE frequencies): not weights. */
const BUFFERS = [/(^|\.)attn\.bias$/, /(^|\.)attn\.masked_bias$/, /\.rotary_emb\.inv_freq$/];

/**
 * The name a kiln parameter has in a Hugging Face file. kiln's names are
 * transformers' own; a GPT-2 saved from GPT2Model (or the original `gpt2`
 * upload) drops the `transformer.` prefix.
 */
export function fileNameOf(kilnName: string, gpt2Prefixed: boolean): string {
  return !gpt2Prefixed && kilnName.startsWith(GPT2_PREFIX) ? kilnName.slice(GPT2_PREFIX.length) : kilnName;
}

/** A tensor of a Hugging Face file that is no parameter kiln loads: a buffer, or a tied lm_head. */
export function isSkippedHfTensor(name: string, model: ModelConfig): boolean {
  if (model.tieEmbeddings && name === "lm_head.weight") return true;
  return BUFFERS.some((b) => b.test(name));
}
