import { type ModelConfig, paramLayout, trainableLayout } from "@kiln/core";
import { formatCount } from "./format-bytes.js";

/** The banner's and kiln estimate's row of what a LoRA run trains ("LoRA", "rank 8, alpha 16 on q_proj, v_proj: 1.1M trained (0.22%), the 494M of the base frozen"); none without LoRA. */
export function loraRows(model: ModelConfig): [string, string][] {
  const lora = model.lora;
  if (!lora) return [];
  const layout = paramLayout(model);
  const trained = trainableLayout(layout).count;
  const share = (100 * trained) / layout.count;
  const dropout = lora.dropout ? `, dropout ${lora.dropout}` : "";
  return [["LoRA", `rank ${lora.rank}, alpha ${lora.alpha}${dropout} on ${lora.targets.join(", ")}: ${formatCount(trained)} trained (${share < 0.1 ? share.toPrecision(2) : share.toFixed(2)}%), the ${formatCount(layout.count - trained)} of the base frozen`]];
}
