import path from "node:path";
import { ConfigError } from "@kiln/contract";
import { META_BASE_MODEL, type ModelConfig, type ParameterPiece, PretrainedWeights, openPeftAdapter } from "@kiln/core";

/** The weights a run starts from: --init-from's, and with --lora-from a PEFT adapter over them. */
export interface StartingWeights {
  weights: PretrainedWeights;
  adapter?: PretrainedWeights;
  /** The model they make: the base's, with the adapter's LoRA shape when there is one. */
  model: ModelConfig;
  /** The base model an exported adapter names (PEFT's base_model_name_or_path): where the base weights came from. */
  baseModel: string;
}

/** Opens and checks --init-from (and --lora-from over it) before anything is written; undefined without --init-from. */
export async function openStartingWeights(initFrom: string | undefined, loraFrom: string | undefined): Promise<StartingWeights | undefined> {
  if (initFrom === undefined) {
    if (loraFrom !== undefined) throw new ConfigError("--lora-from loads an adapter over base weights, and no base was given", { where: "--lora-from", hint: "add --init-from BASE (the Hugging Face folder or kiln checkpoint the adapter was trained on)" });
    return undefined;
  }
  const weights = await PretrainedWeights.open(initFrom);
  // A LoRA checkpoint of kiln's names its own base; other weights are the base themselves.
  const baseModel = weights.metadata[META_BASE_MODEL] ?? path.resolve(initFrom);
  if (loraFrom === undefined) return { weights, model: weights.model, baseModel };
  try {
    if (weights.model.lora) {
      throw new ConfigError(`${initFrom} already carries LoRA adapters`, { where: "--lora-from", hint: "leave out --lora-from to go on training the checkpoint's adapters, or pass the base model to --init-from" });
    }
    const { weights: adapter } = await openPeftAdapter(loraFrom, weights.model);
    return { weights, adapter, model: adapter.model, baseModel };
  } catch (err) {
    await weights.close();
    throw err;
  }
}

/** Every starting tensor: the base's, then the adapter's. */
export async function* startingPieces(start: StartingWeights): AsyncGenerator<ParameterPiece> {
  yield* start.weights.pieces();
  if (start.adapter) yield* start.adapter.pieces();
}

export async function closeStartingWeights(start: StartingWeights | undefined): Promise<void> {
  await start?.weights.close();
  await start?.adapter?.close();
}
