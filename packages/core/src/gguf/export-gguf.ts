import { PretrainedWeights } from "../hf/pretrained-weights.js";
import { paramLayout } from "../model/param-layout.js";
import { GGML_TYPES, type GgmlType, type GgufValue } from "./gguf-format.js";
import { ggufTokenizer } from "./gguf-tokenizer.js";
import { writeGguf } from "./gguf-write.js";
import { encodeGgml } from "./ggml-encode.js";
import { llamaGguf } from "./llama-gguf.js";

/** llama.cpp's general.file_type (LLAMA_FTYPE_*) for a file whose matrices are `type`. */
const FILE_TYPES: Record<GgmlType, number> = { f32: 0, f16: 1, q8_0: 7, bf16: 32 };

/** What exportGguf wrote: the tensors by type (a q8_0 file keeps matrices whose rows are not whole blocks in f16). */
export interface GgufExport {
  tensors: number;
  byType: Partial<Record<GgmlType, number>>;
}

/**
 * Writes a kiln checkpoint (or Hugging Face folder) as one GGUF file llama.cpp loads:
 * general.* keys, the architecture's keys and tensors (llama-gguf.ts), the tokenizer
 * (gguf-tokenizer.ts); matrices in `type`, norms in f32. The file appears whole or not at all.
 */
export async function exportGguf(checkpoint: string, out: string, type: GgmlType = "f32"): Promise<GgufExport> {
  const source = await PretrainedWeights.open(checkpoint);
  try {
    const m = source.model;
    const tokenizer = await source.openTokenizer();
    const weights = await source.read();
    const model = llamaGguf(m, weights, checkpoint);
    const tokens = await ggufTokenizer(tokenizer, m.vocabSize, checkpoint);
    const general: [string, GgufValue][] = [
      ["general.architecture", { type: "string", value: "llama" }],
      ["general.name", { type: "string", value: `kiln ${m.arch} ${paramLayout(m).count} parameters` }],
      ["general.file_type", { type: "u32", value: FILE_TYPES[type] }],
      ...(type === "q8_0" ? ([["general.quantization_version", { type: "u32", value: 2 }]] as [string, GgufValue][]) : []),
    ];
    const byType: Partial<Record<GgmlType, number>> = {};
    const tensors = model.tensors.map((t) => {
      // q8_0 blocks run along rows: a matrix whose rows are not whole blocks stays f16.
      const as: GgmlType = t.keepF32 ? "f32" : type === "q8_0" && t.ne[0] % GGML_TYPES.q8_0.block !== 0 ? "f16" : type;
      byType[as] = (byType[as] ?? 0) + 1;
      return { name: t.name, ne: t.ne, type: as, data: encodeGgml(t.values, as) };
    });
    await writeGguf(out, new Map([...general, ...model.metadata, ...tokens]), tensors);
    return { tensors: tensors.length, byType };
  } finally {
    await source.close();
  }
}
