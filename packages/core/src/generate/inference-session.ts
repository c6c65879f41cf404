import { type Backend, type BufferHandle, CheckpointError } from "@kiln/contract";
import { openSafetensors } from "../checkpoint/safetensors-reader.js";
import type { ModelConfig } from "../model/config.js";
import { type ParamLayout, paramLayout } from "../model/param-layout.js";
import { META_MODEL } from "../train/checkpoint-state.js";
import { ForwardRunner } from "../train/forward-runner.js";
import { type SamplingOptions, sampleToken } from "./sample-token.js";

/**
 * A trained model ready to generate: its weights on a backend and a forward
 * runner over a fixed window of `window` tokens (batch 1). Each new token runs
 * the window once; the prompt and output slide through it.
 */
export class InferenceSession {
  private readonly runner: ForwardRunner;
  private readonly logits: Float32Array<ArrayBuffer>;
  private readonly ids: Int32Array;

  private constructor(
    readonly backend: Backend,
    readonly model: ModelConfig,
    readonly metadata: Record<string, string>,
    private readonly params: BufferHandle,
    layout: ParamLayout,
    readonly window: number,
  ) {
    this.runner = new ForwardRunner(backend, model, layout, params, 1, window);
    this.logits = new Float32Array(window * model.vocabSize);
    this.ids = new Int32Array(window);
  }

  /** Loads the weights of a kiln checkpoint (its metadata names the model). */
  static async fromCheckpoint(backend: Backend, path: string, window?: number): Promise<InferenceSession> {
    const reader = await openSafetensors(path);
    try {
      const meta = reader.metadata;
      if (!meta[META_MODEL]) {
        throw new CheckpointError(`metadata has no ${META_MODEL}: not a kiln checkpoint`, { where: path, hint: "pass a checkpoint written by kiln train" });
      }
      const model = JSON.parse(meta[META_MODEL]) as ModelConfig;
      const layout = paramLayout(model, "f32");
      const params = backend.alloc(layout.bytes);
      for (const s of layout.specs) {
        if (!reader.has(s.name)) throw new CheckpointError(`tensor ${s.name} is missing`, { where: path, hint: "the checkpoint does not hold this model's weights" });
        const { data } = await reader.read(s.name);
        backend.upload({ buffer: params, byteOffset: layout.offsets.get(s.name)! }, data);
      }
      return new InferenceSession(backend, model, meta, params, layout, Math.min(window ?? model.maxSeqLen, model.maxSeqLen));
    } finally {
      await reader.close();
    }
  }

  /** Next-token logits after `context` (only its last `window` tokens are seen). */
  async nextLogits(context: readonly number[]): Promise<Float32Array> {
    const seen = context.slice(-this.window);
    this.ids.fill(0);
    seen.forEach((t, i) => (this.ids[i] = t));
    await this.runner.run(this.ids);
    await this.runner.logits(this.logits);
    const V = this.model.vocabSize;
    return this.logits.subarray((seen.length - 1) * V, seen.length * V);
  }

  /** Generates up to `maxTokens` tokens after `prompt`, calling `onToken` with each. */
  async generate(prompt: readonly number[], maxTokens: number, options: SamplingOptions, onToken: (id: number) => void | boolean): Promise<number[]> {
    if (prompt.length === 0) throw new Error("generation needs at least one prompt token");
    const context = [...prompt];
    const out: number[] = [];
    for (let i = 0; i < maxTokens; i++) {
      const id = sampleToken(await this.nextLogits(context), options, i);
      context.push(id);
      out.push(id);
      if (onToken(id) === false) break;
    }
    return out;
  }

  dispose(): void {
    this.runner.dispose();
    this.backend.free(this.params);
  }
}
