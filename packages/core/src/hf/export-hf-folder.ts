import { readFile } from "node:fs/promises";
import path from "node:path";
import { CheckpointError, type FloatDType, encodeToBytes } from "@kiln/contract";
import { toSafetensorsDType } from "../checkpoint/safetensors-dtype.js";
import { writeSafetensors } from "../checkpoint/safetensors-file.js";
import { gpt2TokenizerFiles } from "../data/gpt2-tokenizer-files.js";
import { HfTokenizer } from "../data/hf-tokenizer.js";
import type { Tokenizer } from "../data/tokenizer.js";
import { writeDirectoryAtomically, writeFileAtomically } from "../fs/write-atomically.js";
import { paramLayout } from "../model/param-layout.js";
import { mergeAdapters, withoutAdapters } from "../model/merge-adapters.js";
import { META_CHAT_TEMPLATE, META_DATA, META_STEP } from "../checkpoint/checkpoint-keys.js";
import { HF_CONFIG_FILE, HF_WEIGHTS_FILE } from "./hf-shards.js";
import { type SpecialTokens, hfConfigOf, hfGenerationConfigOf } from "./hf-config.js";
import { type ModelCardFacts, modelCard } from "./model-card.js";
import { PretrainedWeights } from "./pretrained-weights.js";

/** torch's name for each storage dtype, as config.json's torch_dtype says it. */
const TORCH_DTYPES: Record<FloatDType, string> = { f32: "float32", bf16: "bfloat16", f16: "float16" };

/**
 * Writes a folder transformers loads (AutoModelForCausalLM.from_pretrained) from a
 * kiln checkpoint: config.json, generation_config.json, model.safetensors in
 * `dtype` (metadata {"format":"pt"}), the tokenizer's files (a folder tokenizer's
 * as the checkpoint holds them, or the built-in gpt2's), and a README model card. The folder
 * appears whole or not at all. Returns the names of the files written.
 */
export async function exportHfFolder(checkpoint: string, out: string, dtype: FloatDType = "f32"): Promise<string[]> {
  const source = await PretrainedWeights.open(checkpoint);
  try {
    // A LoRA checkpoint goes out merged (W + (alpha / rank)·B·A): the plain model's folder.
    const m = withoutAdapters(source.model);
    const unexportable = m.numExperts ? "a mixture-of-experts model" : m.kvLatentDim ? "a model with multi-head latent attention" : m.mambaLayers?.length ? `a model with ${m.mamba3Enabled ? "Mamba3" : "Mamba2"} layers` : undefined;
    if (unexportable) {
      throw new CheckpointError(`the checkpoint holds ${unexportable}, which kiln cannot export to a Hugging Face folder yet`, {
        where: checkpoint,
        hint: "sample and resume it with kiln; kiln export writes dense gpt2 and llama models with ordinary attention in every layer",
      });
    }
    const meta = source.metadata;
    const layout = paramLayout(m);
    const tokenizer = await source.openTokenizer();
    const tokens = specialTokens(tokenizer);
    // A folder tokenizer's own files, as they were read (tokenizer.json, tokenizer_config.json, ...); the built-in gpt2's as transformers saves GPT-2's.
    const tokenizerFiles = Object.entries(tokenizer?.files ?? (tokenizer?.name === "gpt2" ? await gpt2TokenizerFiles() : {}));
    // The chat template the run trained with, as transformers reads it beside the tokenizer.
    const template = meta[META_CHAT_TEMPLATE];
    if (template !== undefined && tokenizerFiles.length > 0) {
      const at = tokenizerFiles.findIndex(([name]) => name === "chat_template.jinja");
      if (at >= 0) tokenizerFiles[at] = ["chat_template.jinja", template];
      else tokenizerFiles.push(["chat_template.jinja", template]);
    }
    const facts: ModelCardFacts = {
      tokenizerFiles: tokenizerFiles.length > 0,
      model: m,
      ...(source.model.lora ? { lora: source.model.lora } : {}),
      parameters: layout.count,
      dtype,
      ...(meta[META_STEP] !== undefined ? { step: Number(meta[META_STEP]) } : {}),
      ...(tokenizer ? { tokenizer: tokenizer.name } : {}),
      ...(meta[META_DATA] ? { data: meta[META_DATA] } : {}),
      ...(await lastLosses(path.dirname(checkpoint))),
    };
    const files = {
      [HF_CONFIG_FILE]: hfConfigOf(m, TORCH_DTYPES[dtype], tokens),
      "generation_config.json": hfGenerationConfigOf(tokens),
    };
    await writeDirectoryAtomically(
      out,
      async (dir) => {
        const { weights } = mergeAdapters(source.model, await source.read());
        for (const [name, json] of Object.entries(files)) await writeText(path.join(dir, name), `${JSON.stringify(json, null, 2)}\n`);
        await writeSafetensors(
          path.join(dir, HF_WEIGHTS_FILE),
          layout.specs.map((s) => {
            const values = weights.get(s.name)!;
            return { name: s.name, dtype: toSafetensorsDType(dtype), shape: s.shape, data: dtype === "f32" ? values : encodeToBytes(values, dtype) };
          }),
          { format: "pt" },
        );
        for (const [name, text] of tokenizerFiles) await writeText(path.join(dir, name), text);
        await writeText(path.join(dir, "README.md"), modelCard(facts));
      },
      { error: CheckpointError },
    );
    return [...Object.keys(files), HF_WEIGHTS_FILE, ...tokenizerFiles.map(([name]) => name), "README.md"];
  } finally {
    await source.close();
  }
}
function writeText(file: string, text: string): Promise<void> {
  return writeFileAtomically(file, text, { what: "model file", error: CheckpointError });
}

/** A folder tokenizer's BOS and EOS; a built-in one's <|endoftext|> as both (GPT-2's convention). */
function specialTokens(tokenizer: Tokenizer | undefined): SpecialTokens {
  if (tokenizer instanceof HfTokenizer) return { ...(tokenizer.bos !== undefined ? { bos: tokenizer.bos } : {}), ...(tokenizer.eos !== undefined ? { eos: tokenizer.eos } : {}) };
  const eos = tokenizer?.endOfText;
  return eos === undefined ? {} : { bos: eos, eos };
}

/** The last training and validation loss in metrics.jsonl beside the checkpoint, where there is one. */
async function lastLosses(dir: string): Promise<Pick<ModelCardFacts, "loss" | "valLoss">> {
  let text: string;
  try {
    text = await readFile(path.join(dir, "metrics.jsonl"), "utf8");
  } catch {
    return {};
  }
  const out: Pick<ModelCardFacts, "loss" | "valLoss"> = {};
  for (const line of text.split("\n")) {
    try {
      const r = JSON.parse(line) as { loss?: unknown; val_loss?: unknown };
      if (typeof r.loss === "number") out.loss = r.loss;
      if (typeof r.val_loss === "number") out.valLoss = r.val_loss;
    } catch {
      // A torn last line: the lines before it still count.
    }
  }
  return out;
}
