import type { Backend } from "@kiln/contract";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import type { PretrainedWeights } from "../hf/pretrained-weights.js";
import { TokenGenerator, loadWeights } from "./token-generator.js";

/** A TokenGenerator over the weights of a checkpoint file or a Hugging Face folder. */
export class InferenceSession extends TokenGenerator {
  /** Runs opened weights (a Hugging Face folder, say) in f32; their metadata names the tokenizer where they have one. */
  static async fromWeights(backend: Backend, weights: PretrainedWeights, window?: number): Promise<InferenceSession> {
    const { layout, params } = await weights.upload(backend);
    const model = weights.model;
    return new InferenceSession(backend, model, weights.metadata, params, layout, Math.min(window ?? model.maxSeqLen, model.maxSeqLen));
  }

  /** Loads the weights of a kiln checkpoint (its metadata names the model), in the dtype they are stored in. */
  static async fromCheckpoint(backend: Backend, path: string, window?: number): Promise<InferenceSession> {
    const reader = await openSafetensors(path);
    try {
      return new InferenceSession(...(await loadWeights(backend, reader, path, window)));
    } finally {
      await reader.close();
    }
  }
}
