import { DataError } from "@kiln/contract";
import { META_CHAT_TEMPLATE, META_TOKENIZER, META_TOKENIZER_FILES, dataSidecarPath, isTokenizerName, readTokenizerFiles, sameTokenizer, tokenizerIdentity } from "@kiln/core";
import type { TrainingData } from "./training-data.js";

/** The tokenizer the weights a run starts from were trained with, from their metadata (META_TOKENIZER, META_TOKENIZER_FILES). */
export interface ModelTokenizer {
  metadata: Record<string, string>;
  /** The --init-from folder or checkpoint, or the --resume checkpoint. */
  source: string;
}

/**
 * The tokenizer a run records in its checkpoints (META_TOKENIZER, and a folder tokenizer's
 * files in META_TOKENIZER_FILES): the data's, or the model's when the data does not say.
 * Refuses data prepared with another tokenizer than the model's, naming both.
 */
export async function runTokenizer(data: TrainingData, model: ModelTokenizer | undefined, warn: (text: string) => void): Promise<Record<string, string>> {
  const modelId = model?.metadata[META_TOKENIZER];
  const dataId = data.tokenizer;
  if (dataId !== undefined && modelId !== undefined && !sameTokenizer(dataId, modelId)) {
    throw new DataError(`the data was prepared with tokenizer ${dataId}, but the model was trained with tokenizer ${modelId}`, {
      where: dataSidecarPath(data.file),
      hint: `tokenize the data with the model's tokenizer (kiln prepare --tokenizer ${isTokenizerName(modelId) ? modelId : model!.source} ...), or start from weights trained with the data's`,
    });
  }
  // The chat template of the data's chat rows, else the one the starting weights carry.
  const template = data.chatTemplate ?? model?.metadata[META_CHAT_TEMPLATE];
  const chat: Record<string, string> = template !== undefined ? { [META_CHAT_TEMPLATE]: template } : {};
  const identity = dataId ?? modelId;
  if (identity === undefined) return chat;
  if (isTokenizerName(identity)) return { [META_TOKENIZER]: identity, ...chat };
  const files = model?.metadata[META_TOKENIZER_FILES] ?? (await sidecarTokenizerFiles(identity, data.tokenizerPath));
  if (files === undefined) {
    warn(`warning: the files of tokenizer ${identity} were not found${data.tokenizerPath ? ` (${data.tokenizerPath} is gone or changed)` : ""}; checkpoints name it without them, so kiln sample and kiln export need it given again`);
  }
  return { [META_TOKENIZER]: identity, ...(files !== undefined ? { [META_TOKENIZER_FILES]: files } : {}), ...chat };
}

/** The files of the folder a data sidecar names, as JSON, when they are still the tokenizer `identity` names. */
async function sidecarTokenizerFiles(identity: string, folder: string | undefined): Promise<string | undefined> {
  if (folder === undefined) return undefined;
  const found = await readTokenizerFiles(folder, false).catch(() => undefined);
  if (!found || !sameTokenizer(identity, tokenizerIdentity(found.name, found.files["tokenizer.json"]!))) return undefined;
  return JSON.stringify(found.files);
}
