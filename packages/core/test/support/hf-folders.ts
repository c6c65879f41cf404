import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { encodeToBytes } from "@kiln/contract";
import { writeSafetensors } from "../../src/checkpoint/safetensors-file.js";
import type { SafetensorsTensorInput } from "../../src/checkpoint/safetensors-layout.js";
import type { ModelConfig } from "../../src/model/config.js";
import { resolveModelConfig } from "../../src/model/architectures.js";
import { paramLayout } from "../../src/model/param-layout.js";
import { fillNormal } from "../../src/rng/philox.js";
import { META_MODEL, META_STEP, META_TOKENIZER } from "../../src/checkpoint/checkpoint-keys.js";
import { hfConfigOf } from "../../src/hf/hf-config.js";

export const TINY_GPT2 = resolveModelConfig({ arch: "gpt2", vocabSize: 40, hiddenSize: 16, numLayers: 2, numHeads: 2, maxSeqLen: 8 });
export const TINY_LLAMA = resolveModelConfig({ arch: "llama", vocabSize: 40, hiddenSize: 16, numLayers: 2, numHeads: 4, kvHeads: 2, maxSeqLen: 8, intermediateSize: 24 });

/** Random weights for every parameter of `model`, by kiln name. */
export function randomWeights(model: ModelConfig, seed = 1): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  paramLayout(model).specs.forEach((s, i) => {
    const v = new Float32Array(s.shape.reduce((a, b) => a * b, 1));
    fillNormal(v, seed, i, 0.5);
    out.set(s.name, v);
  });
  return out;
}

/** A kiln weights checkpoint (as final.safetensors is written) of `weights`; `metadata` adds to or replaces its keys. */
export async function writeKilnCheckpoint(file: string, model: ModelConfig, weights: Map<string, Float32Array>, metadata: Record<string, string> = {}): Promise<void> {
  const tensors = paramLayout(model).specs.map((s) => ({ name: s.name, dtype: "F32" as const, shape: s.shape, data: weights.get(s.name)! }));
  await writeSafetensors(file, tensors, { [META_MODEL]: JSON.stringify(model), [META_STEP]: "3", [META_TOKENIZER]: "gpt2", format: "pt", ...metadata });
}

export interface HfFolderOptions {
  dtype?: "F32" | "BF16" | "F16";
  /** GPT-2 names without `transformer.` (as the original gpt2 upload). */
  dropPrefix?: boolean;
  /** Split the tensors over this many shards with model.safetensors.index.json. */
  shards?: number;
  /** Tensors added as they are (buffers, a tied lm_head, strays). */
  extra?: SafetensorsTensorInput[];
  config?: Record<string, unknown>;
}

/** A Hugging Face model folder as transformers saves one. */
export async function writeHfFolder(dir: string, model: ModelConfig, weights: Map<string, Float32Array>, o: HfFolderOptions = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  const dtype = o.dtype ?? "F32";
  const tensors: SafetensorsTensorInput[] = paramLayout(model).specs.map((s) => {
    const v = weights.get(s.name)!;
    return {
      name: o.dropPrefix ? s.name.replace(/^transformer\./, "") : s.name,
      dtype,
      shape: s.shape,
      data: dtype === "F32" ? v : encodeToBytes(v, dtype === "BF16" ? "bf16" : "f16"),
    };
  });
  tensors.push(...(o.extra ?? []));
  await writeFile(path.join(dir, "config.json"), JSON.stringify({ ...hfConfigOf(model, "float32"), ...o.config }));
  const shards = o.shards ?? 1;
  if (shards === 1) {
    await writeSafetensors(path.join(dir, "model.safetensors"), tensors, { format: "pt" });
    return;
  }
  const weightMap: Record<string, string> = {};
  for (let k = 0; k < shards; k++) {
    const name = `model-${String(k + 1).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.safetensors`;
    const part = tensors.filter((_, i) => i % shards === k);
    for (const t of part) weightMap[t.name] = name;
    await writeSafetensors(path.join(dir, name), part, { format: "pt" });
  }
  await writeFile(path.join(dir, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: 0 }, weight_map: weightMap }));
}
