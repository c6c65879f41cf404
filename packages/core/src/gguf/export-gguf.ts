import { PretrainedWeights } from "../hf/pretrained-weights.js";
import { mergeAdapters, withoutAdapters } from "../model/merge-adapters.js";
import { CheckpointError } from "@kiln/contract";
import { paramLayout } from "../model/param-layout.js";
import { META_TOKENIZER, META_TOKENIZER_FILES } from "../checkpoint/checkpoint-keys.js";
import { GGML_TYPES, type GgmlType, type GgufValue } from "./gguf-format.js";
import { ggufTokenizer } from "./gguf-tokenizer.js";
import { writeGguf } from "./gguf-write.js";
import { encodeGgml } from "./ggml-encode.js";
import { ggufModelOf } from "./gguf-architectures.js";
import { ggufShape, toGguf } from "./gguf-tensor-map.js";
import { GGUF_KILN_MODEL, GGUF_KILN_TOKENIZER, GGUF_KILN_TOKENIZER_FILES } from "./gguf-kiln-keys.js";

/** llama.cpp's general.file_type (LLAMA_FTYPE_*) for a file whose matrices are `type`. */
const FILE_TYPES: Record<GgmlType, number> = { f32: 0, f16: 1, q8_0: 7, bf16: 32 };

/** What exportGguf wrote: the tensors by type (a q8_0 file keeps matrices whose rows are not whole blocks in f16). */
export interface GgufExport {
  tensors: number;
  byType: Partial<Record<GgmlType, number>>;
  /** llama.cpp's architecture the file names. */
  arch: string;
  /** What a user should know about the file (a limit llama.cpp puts on it). */
  notes: string[];
}

const str = (value: string): GgufValue => ({ type: "string", value });

/**
 * Writes a kiln checkpoint (or Hugging Face folder) as one GGUF file llama.cpp loads:
 * general.* keys, the architecture's keys and tensors (gguf-architectures.ts), the tokenizer
 * (gguf-tokenizer.ts), and kiln.* keys (the model and tokenizer) that let kiln sample read it
 * back; matrices in `type`, 1-D tensors in f32. The file appears whole or not at all.
 */
export async function exportGguf(checkpoint: string, out: string, type: GgmlType = "f32"): Promise<GgufExport> {
  const source = await PretrainedWeights.open(checkpoint);
  try {
    // A LoRA checkpoint goes out merged: the plain model's tensors.
    const m = withoutAdapters(source.model);
    const model = ggufModelOf(m, checkpoint);
    const tokenizer = await source.openTokenizer();
    const tokens = await ggufTokenizer(tokenizer, m.vocabSize, checkpoint);
    const { weights } = mergeAdapters(source.model, await source.read());
    const get = (name: string) => {
      const w = weights.get(name);
      if (!w) throw new CheckpointError(`the checkpoint has no tensor ${name}`, { where: checkpoint, hint: "the checkpoint is damaged; export another one" });
      return w;
    };
    const meta = source.metadata;
    const general: [string, GgufValue][] = [
      ["general.architecture", str(model.arch)],
      ["general.name", str(`kiln ${m.arch} ${paramLayout(m).count} parameters`)],
      ["general.file_type", { type: "u32", value: FILE_TYPES[type] }],
      ...(type === "q8_0" ? ([["general.quantization_version", { type: "u32", value: 2 }]] as [string, GgufValue][]) : []),
    ];
    const kiln: [string, GgufValue][] = [
      [GGUF_KILN_MODEL, str(JSON.stringify(m))],
      ...(meta[META_TOKENIZER] !== undefined ? ([[GGUF_KILN_TOKENIZER, str(meta[META_TOKENIZER])]] as [string, GgufValue][]) : []),
      ...(meta[META_TOKENIZER_FILES] !== undefined ? ([[GGUF_KILN_TOKENIZER_FILES, str(meta[META_TOKENIZER_FILES])]] as [string, GgufValue][]) : []),
    ];
    const byType: Partial<Record<GgmlType, number>> = {};
    const tensor = (name: string, ne: number[], keepF32: boolean, values: Float32Array) => {
      // q8_0 blocks run along rows: a matrix whose rows are not whole blocks stays f16.
      const as: GgmlType = keepF32 ? "f32" : type === "q8_0" && ne[0] % GGML_TYPES.q8_0.block !== 0 ? "f16" : type;
      byType[as] = (byType[as] ?? 0) + 1;
      return { name, ne, type: as, data: encodeGgml(values, as) };
    };
    const tensors = [
      ...model.tensors.map((r) => tensor(r.gguf, ggufShape(r), r.keepF32, toGguf(r, get(r.kiln)))),
      ...model.derived.map((d) => tensor(d.name, d.ne, d.keepF32, d.values(get))),
    ];
    await writeGguf(out, new Map([...general, ...model.metadata, ...tokens, ...kiln]), tensors);
    return { tensors: tensors.length, byType, arch: model.arch, notes: model.notes };
  } finally {
    await source.close();
  }
}
