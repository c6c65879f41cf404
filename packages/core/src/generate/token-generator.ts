import { type Backend, type BufferHandle, CheckpointError, type FloatDType, isFloatDType } from "@kiln/contract";
import { fromSafetensorsDType } from "../checkpoint/safetensors-dtype.js";
import type { TensorSource } from "../train/checkpoint-contents.js";
import type { ModelConfig } from "../model/config.js";
import { type ParamLayout, paramLayout } from "../model/param-layout.js";
import { META_MODEL } from "../checkpoint/checkpoint-keys.js";
import { ForwardRunner } from "../train/forward-runner.js";
import { type SamplingOptions, sampleToken } from "./sample-token.js";

/**
 * The dtype the weights of a checkpoint are stored in (f32 in training checkpoints,
 * the training dtype in exported ones): one float dtype for every weight, which
 * generation then runs in.
 */
function weightDType(reader: TensorSource, model: ModelConfig, path: string): FloatDType {
  const dtypes = new Set<string>();
  for (const s of paramLayout(model, "f32").specs) {
    if (!reader.has(s.name)) throw new CheckpointError(`tensor ${s.name} is missing`, { where: path, hint: "the checkpoint does not hold this model's weights" });
    const info = reader.info(s.name);
    const dtype = fromSafetensorsDType(info.dtype);
    if (dtype === undefined || !isFloatDType(dtype)) {
      throw new CheckpointError(`tensor ${s.name} is ${info.dtype}; kiln runs F32, BF16 and F16 weights`, { where: path, hint: "export the weights as F32, BF16 or F16" });
    }
    if (info.shape.join(",") !== s.shape.join(",")) {
      throw new CheckpointError(`tensor ${s.name} is [${info.shape}], the model needs [${s.shape}]`, { where: path, hint: "the checkpoint's kiln.model does not match its weights" });
    }
    dtypes.add(dtype);
  }
  if (dtypes.size !== 1) {
    throw new CheckpointError(`the weights mix dtypes (${[...dtypes].join(", ")})`, { where: path, hint: "export every weight in one dtype (kiln train --export-dtype)" });
  }
  return [...dtypes][0] as FloatDType;
}

/**
 * A trained model ready to generate: its weights on a backend and a forward
 * runner over a fixed window of `window` tokens (batch 1). Each new token runs
 * the window once; the prompt and output slide through it. Loads from tensors
 * held anywhere (no file system here); InferenceSession adds checkpoint files.
 */
export class TokenGenerator {
  private readonly runner: ForwardRunner;
  private readonly logits: Float32Array<ArrayBuffer>;
  private readonly ids: Int32Array;

  protected constructor(
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

  /**
   * Loads the weights of a kiln checkpoint (its metadata names the model), in the
   * dtype they are stored in; `where` names the checkpoint in errors.
   */
  static async fromTensors(backend: Backend, source: TensorSource, where: string, window?: number): Promise<TokenGenerator> {
    return new TokenGenerator(...(await loadWeights(backend, source, where, window)));
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

/** The constructor arguments of a generator over a checkpoint's weights, uploaded to `backend`. */
export async function loadWeights(
  backend: Backend,
  source: TensorSource,
  where: string,
  window?: number,
): Promise<[Backend, ModelConfig, Record<string, string>, BufferHandle, ParamLayout, number]> {
  const meta = source.metadata;
  if (!meta[META_MODEL]) {
    throw new CheckpointError(`metadata has no ${META_MODEL}: not a kiln checkpoint`, { where, hint: "pass a checkpoint written by kiln train" });
  }
  const model = JSON.parse(meta[META_MODEL]) as ModelConfig;
  const layout = paramLayout(model, weightDType(source, model, where));
  const params = backend.alloc(layout.bytes);
  try {
    for (const s of layout.specs) {
      const { data } = await source.read(s.name);
      backend.upload({ buffer: params, byteOffset: layout.offsets.get(s.name)! }, data);
    }
  } catch (err) {
    backend.free(params);
    throw err;
  }
  return [backend, model, meta, params, layout, Math.min(window ?? model.maxSeqLen, model.maxSeqLen)];
}
