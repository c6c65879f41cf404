import { open } from "node:fs/promises";
import { CheckpointError } from "@kiln/contract";
import { META_MODEL, META_TOKENIZER, META_TOKENIZER_FILES } from "../checkpoint/checkpoint-keys.js";
import type { TensorSource } from "../train/checkpoint-contents.js";
import type { ModelConfig } from "../model/config.js";
import { decodeGgml } from "./ggml-encode.js";
import { GGUF_MAGIC } from "./gguf-format.js";
import { ggufModelOf } from "./gguf-architectures.js";
import { GGUF_KILN_MODEL, GGUF_KILN_TOKENIZER, GGUF_KILN_TOKENIZER_FILES } from "./gguf-kiln-keys.js";
import { type GgufTensorInfo, readGgufHeader } from "./gguf-read.js";
import { fromGguf, ggufShape } from "./gguf-tensor-map.js";

/** Whether `file` starts with GGUF's magic. */
export async function isGgufFile(file: string): Promise<boolean> {
  const fh = await open(file, "r").catch(() => undefined);
  if (!fh) return false;
  try {
    const head = new Uint8Array(4);
    const { bytesRead } = await fh.read(head, 0, 4, 0);
    return bytesRead === 4 && new DataView(head.buffer).getUint32(0, true) === GGUF_MAGIC;
  } finally {
    await fh.close();
  }
}

/**
 * A GGUF file kiln wrote, as the f32 parameters of its kiln model (quantized tensors
 * dequantized, llama.cpp's layouts undone): a TensorSource whose metadata holds the model
 * and tokenizer as a checkpoint's does. Every tensor is checked against the model before any
 * data is read; a file without kiln's keys is refused.
 */
export async function openGgufWeights(file: string): Promise<TensorSource> {
  const g = await readGgufHeader(file);
  const text = (key: string) => {
    const v = g.metadata.get(key);
    return v?.type === "string" ? v.value : undefined;
  };
  const modelJson = text(GGUF_KILN_MODEL);
  if (modelJson === undefined) {
    throw new CheckpointError(`the GGUF file has no ${GGUF_KILN_MODEL} key: kiln reads back the GGUF files it writes`, {
      where: file,
      hint: "pass a file written by kiln export --format gguf, or run this one with llama.cpp",
    });
  }
  let model: ModelConfig;
  try {
    model = JSON.parse(modelJson) as ModelConfig;
  } catch {
    throw new CheckpointError(`the GGUF file's ${GGUF_KILN_MODEL} is not JSON`, { where: file, hint: "the file is corrupt; export it again" });
  }
  const rules = ggufModelOf(model, file).tensors;
  const infos = new Map<string, GgufTensorInfo>(g.tensors.map((t) => [t.name, t]));
  for (const r of rules) {
    const t = infos.get(r.gguf);
    if (!t) throw new CheckpointError(`the GGUF file has no tensor ${r.gguf} (${r.kiln})`, { where: file, hint: "the file is corrupt or not this model's; export it again" });
    if (t.ne.join(",") !== ggufShape(r).join(",")) {
      throw new CheckpointError(`GGUF tensor ${r.gguf} is [${t.ne}], the model needs [${ggufShape(r)}]`, { where: file, hint: "the file is corrupt or not this model's; export it again" });
    }
  }
  const byKiln = new Map(rules.map((r) => [r.kiln, r]));
  const metadata: Record<string, string> = { [META_MODEL]: modelJson };
  const tokenizer = text(GGUF_KILN_TOKENIZER), files = text(GGUF_KILN_TOKENIZER_FILES);
  if (tokenizer !== undefined) metadata[META_TOKENIZER] = tokenizer;
  if (files !== undefined) metadata[META_TOKENIZER_FILES] = files;
  const rule = (name: string) => {
    const r = byKiln.get(name);
    if (!r) throw new CheckpointError(`the model has no parameter ${name}`, { where: file, hint: "this is a bug in kiln's GGUF reader; please report it" });
    return r;
  };
  return {
    metadata,
    names: rules.map((r) => r.kiln),
    has: (name) => byKiln.has(name),
    info: (name) => ({ dtype: "F32", shape: rule(name).shape }),
    async read(name) {
      const r = rule(name), t = infos.get(r.gguf)!;
      const fh = await open(file, "r");
      try {
        const raw = new Uint8Array(t.bytes);
        const { bytesRead } = await fh.read(raw, 0, t.bytes, t.offset);
        if (bytesRead !== t.bytes) throw new CheckpointError(`tensor ${t.name} ends past the end of the file`, { where: `${file} (byte ${t.offset + bytesRead})`, hint: "the file is truncated; export it again" });
        const values = fromGguf(r, decodeGgml(raw, t.type, t.ne.reduce((a, b) => a * b, 1)));
        return { data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) };
      } finally {
        await fh.close();
      }
    },
  };
}
