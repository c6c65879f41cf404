import type { Backend } from "@kiln/contract";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import { TokenGenerator, loadWeights } from "./token-generator.js";

/** A TokenGenerator over the weights of a checkpoint file. */
export class InferenceSession extends TokenGenerator {
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
