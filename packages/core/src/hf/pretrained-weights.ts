import { stat } from "node:fs/promises";
import path from "node:path";
import { type Backend, type BufferHandle, CheckpointError, bytesPerElement, decodeElements, isFloatDType } from "@kiln/contract";
import { fromSafetensorsDType } from "../checkpoint/safetensors-dtype.js";
import { type SafetensorsReader, openSafetensors } from "../checkpoint/safetensors-reader.js";
import { elementCount } from "../graph/tensor.js";
import type { ModelConfig } from "../model/config.js";
import { type ParamLayout, paramLayout } from "../model/param-layout.js";
import { tokenizerOfCheckpoint } from "../data/open-tokenizer.js";
import type { Tokenizer } from "../data/tokenizer.js";
import { readTokenizerFiles, tokenizerIdentity } from "../data/tokenizer-files.js";
import { EXP_AVG, EXP_AVG_SQ, META_MODEL, META_TOKENIZER, META_TOKENIZER_FILES } from "../checkpoint/checkpoint-keys.js";
import { modelConfigFromHf } from "./hf-config.js";
import { HF_CONFIG_FILE, openHfTensorFiles, readJsonFile } from "./hf-shards.js";
import { fileNameOf, isSkippedHfTensor } from "./hf-tensor-names.js";

/** Where one parameter's values lie: a file and the tensor's name in it. */
/** A run of one parameter's values, `elementOffset` onwards, of `elements` in all. */
export interface ParameterPiece {
  name: string;
  elementOffset: number;
  elements: number;
  values: Float32Array;
}

export interface TensorSource {
  reader: SafetensorsReader;
  name: string;
}

/**
 * Weights to start training from: a Hugging Face folder or a kiln checkpoint,
 * opened and checked (model, every tensor's presence, dtype and shape) before
 * any tensor data is read.
 */
export class PretrainedWeights {
  constructor(
    readonly path: string,
    readonly kind: "huggingface" | "kiln" | "peft",
    readonly model: ModelConfig,
    /** The file to name in messages about the model: config.json, or the checkpoint. */
    readonly modelSource: string,
    /** A kiln checkpoint's metadata; a Hugging Face folder's tokenizer as a checkpoint records it, when it has tokenizer.json. */
    readonly metadata: Record<string, string>,
    private readonly sources: Map<string, TensorSource>,
    private readonly readers: SafetensorsReader[],
  ) {}

  /** Opens a Hugging Face model folder or a kiln .safetensors checkpoint. */
  static async open(location: string): Promise<PretrainedWeights> {
    const isDir = await stat(location).then(
      (s) => s.isDirectory(),
      () => {
        throw new CheckpointError("no such file or folder", { where: location, hint: "pass a Hugging Face model folder (config.json + model.safetensors) or a kiln checkpoint (.safetensors)" });
      },
    );
    return isDir ? openHfFolder(location) : openKilnCheckpoint(location);
  }

  /** The tokenizer of the model: a kiln checkpoint's data's, or a Hugging Face folder's tokenizer.json (its identity). */
  get tokenizer(): string | undefined {
    return this.metadata[META_TOKENIZER];
  }

  /** That tokenizer, ready to use; undefined when the weights do not say which. */
  async openTokenizer(): Promise<Tokenizer | undefined> {
    const identity = this.tokenizer;
    return identity === undefined ? undefined : tokenizerOfCheckpoint(identity, this.metadata[META_TOKENIZER_FILES], this.path);
  }

  /** Every parameter as f32 values by kiln name (16-bit tensors widened exactly). */
  async read(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const [kilnName, { reader, name }] of this.sources) {
      const t = await reader.read(name);
      const n = elementCount(t.shape);
      const dtype = fromSafetensorsDType(t.dtype)!;
      out.set(kilnName, dtype === "f32" ? new Float32Array(t.data.buffer, t.data.byteOffset, n) : Float32Array.from(decodeElements(t.data, dtype, n)));
    }
    return out;
  }

  /**
   * The parameters as pieces of at most `pieceBytes` bytes of f32 values, read as
   * they are asked for, so that loading them needs one piece of host memory rather
   * than a copy of the whole model.
   */
  async *pieces(pieceBytes = 4 * 2 ** 20): AsyncGenerator<ParameterPiece> {
    for (const [kilnName, { reader, name }] of this.sources) {
      const info = reader.info(name);
      const dtype = fromSafetensorsDType(info.dtype)!;
      const width = bytesPerElement(dtype);
      const elements = elementCount(info.shape);
      const per = Math.max(1, Math.floor(pieceBytes / 4));
      for (let at = 0; at < elements; at += per) {
        const n = Math.min(per, elements - at);
        const raw = new Uint8Array(n * width);
        await reader.readRange(name, at * width, raw);
        yield { name: kilnName, elementOffset: at, elements, values: dtype === "f32" ? new Float32Array(raw.buffer, 0, n) : Float32Array.from(decodeElements(raw, dtype, n)) };
      }
    }
  }

  /** The parameters as f32 in one new buffer of `backend`, laid out as paramLayout(model, "f32") says. */
  async upload(backend: Backend): Promise<{ layout: ParamLayout; params: BufferHandle }> {
    const layout = paramLayout(this.model, "f32");
    const params = backend.alloc(layout.bytes);
    try {
      for await (const piece of this.pieces()) {
        backend.upload({ buffer: params, byteOffset: layout.offsets.get(piece.name)! + 4 * piece.elementOffset }, piece.values);
      }
    } catch (err) {
      backend.free(params);
      throw err;
    }
    return { layout, params };
  }

  async close(): Promise<void> {
    await Promise.all(this.readers.map((r) => r.close()));
  }

}

/**
 * The model of weights at `location` and the file that describes it, without reading the
 * weights: a Hugging Face folder's config.json alone (the tensors need not be there yet), or
 * a kiln checkpoint's header.
 */
export async function pretrainedModel(location: string): Promise<{ model: ModelConfig; source: string }> {
  const isDir = await stat(location).then(
    (s) => s.isDirectory(),
    () => {
      throw new CheckpointError("no such file or folder", { where: location, hint: "pass a Hugging Face model folder (its config.json) or a kiln checkpoint (.safetensors)" });
    },
  );
  if (!isDir) {
    const weights = await openKilnCheckpoint(location);
    await weights.close();
    return { model: weights.model, source: weights.modelSource };
  }
  const configFile = path.join(location, HF_CONFIG_FILE);
  return { model: modelConfigFromHf(await readJsonFile(configFile, "a Hugging Face model folder has a config.json"), configFile), source: configFile };
}

async function openHfFolder(dir: string): Promise<PretrainedWeights> {
  const configFile = path.join(dir, HF_CONFIG_FILE);
  const model = modelConfigFromHf(await readJsonFile(configFile, "a Hugging Face model folder has a config.json beside its weights"), configFile);
  const files = await openHfTensorFiles(dir);
  try {
    const gpt2Prefixed = model.arch !== "gpt2" || files.byTensor.has("transformer.wte.weight");
    const sources = new Map<string, TensorSource>();
    const claimed = new Set<string>();
    for (const s of paramLayout(model).specs) {
      const name = fileNameOf(s.name, gpt2Prefixed);
      const reader = files.byTensor.get(name);
      if (!reader) {
        throw new CheckpointError(`tensor ${name} is missing`, { where: files.readers.length === 1 ? files.readers[0].path : dir, hint: `${HF_CONFIG_FILE} describes a ${model.arch} model that has this tensor; the weights belong to another model` });
      }
      checkTensor(reader, name, s.shape, `${HF_CONFIG_FILE} says`);
      sources.set(s.name, { reader, name });
      claimed.add(name);
    }
    for (const [name, reader] of files.byTensor) {
      if (claimed.has(name) || isSkippedHfTensor(name, model)) continue;
      throw new CheckpointError(`tensor ${name} is not a parameter of kiln's ${model.arch} model`, { where: reader.path, hint: `the weights hold more than ${HF_CONFIG_FILE} describes; kiln cannot represent this model` });
    }
    const tokenizer = await readTokenizerFiles(dir, false);
    const metadata: Record<string, string> = tokenizer
      ? { [META_TOKENIZER]: tokenizerIdentity(tokenizer.name, tokenizer.files["tokenizer.json"]!), [META_TOKENIZER_FILES]: JSON.stringify(tokenizer.files) }
      : {};
    return new PretrainedWeights(dir, "huggingface", model, configFile, metadata, sources, files.readers);
  } catch (err) {
    await Promise.all(files.readers.map((r) => r.close()));
    throw err;
  }
}

async function openKilnCheckpoint(file: string): Promise<PretrainedWeights> {
  const reader = await openSafetensors(file);
  try {
    const text = reader.metadata[META_MODEL];
    if (text === undefined) {
      throw new CheckpointError(`metadata has no ${META_MODEL}: not a kiln checkpoint`, { where: file, hint: "pass a kiln checkpoint (final.safetensors, step_N.safetensors) or a Hugging Face model folder" });
    }
    const model = JSON.parse(text) as ModelConfig;
    const sources = new Map<string, TensorSource>();
    for (const s of paramLayout(model).specs) {
      if (!reader.has(s.name)) throw new CheckpointError(`tensor ${s.name} is missing`, { where: file, hint: "the checkpoint does not hold the weights of its own kiln.model" });
      checkTensor(reader, s.name, s.shape, `${META_MODEL} says`);
      sources.set(s.name, { reader, name: s.name });
    }
    for (const name of reader.names) {
      if (sources.has(name) || name.startsWith(EXP_AVG) || name.startsWith(EXP_AVG_SQ)) continue;
      throw new CheckpointError(`tensor ${name} is not a parameter of the checkpoint's ${model.arch} model`, { where: file, hint: "the checkpoint is damaged or was not written by kiln" });
    }
    return new PretrainedWeights(file, "kiln", model, file, reader.metadata, sources, [reader]);
  } catch (err) {
    await reader.close();
    throw err;
  }
}

/** A float tensor of the shape the model needs, or a CheckpointError naming file and tensor. */
export function checkTensor(reader: SafetensorsReader, name: string, shape: readonly number[], says: string): void {
  const info = reader.info(name);
  const dtype = fromSafetensorsDType(info.dtype);
  if (dtype === undefined || !isFloatDType(dtype)) {
    throw new CheckpointError(`tensor ${name} is ${info.dtype}; kiln loads F32, BF16 and F16 weights`, { where: reader.path, hint: "save the weights as float32, bfloat16 or float16" });
  }
  if (info.shape.join(",") !== shape.join(",")) {
    throw new CheckpointError(`tensor ${name} has shape [${info.shape.join(", ")}], but ${says} the model needs [${shape.join(", ")}]`, { where: reader.path, hint: "the weights and the model config do not belong together" });
  }
}
