import type { FloatDType } from "@kiln/contract";
import type { LoraConfig, ModelConfig } from "../model/config.js";
import { HF_ARCHITECTURES } from "./hf-config.js";

/** What a model card says about an exported model; unknown facts are left out. */
export interface ModelCardFacts {
  model: ModelConfig;
  parameters: number;
  dtype: FloatDType;
  /** The LoRA adapters merged into the weights, when the run trained adapters. */
  lora?: LoraConfig;
  step?: number;
  tokenizer?: string;
  /** Whether the folder holds the tokenizer's files (tokenizer.json, ...). */
  tokenizerFiles?: boolean;
  data?: string;
  loss?: number;
  valLoss?: number;
}

/** What kiln's other built-in tokenizers are, for people encoding input elsewhere. */
const BUILTIN_ENCODINGS: Record<string, string> = { cl100k: "tiktoken's cl100k_base", o200k: "tiktoken's o200k_base", bytes: "one token per UTF-8 byte" };

/** README.md of an exported folder: Hugging Face front matter, then architecture, training and how to load it. */
export function modelCard(f: ModelCardFacts): string {
  const m = f.model;
  const rows: [string, string][] = [
    ["architecture", `${HF_ARCHITECTURES[m.arch]} (${m.arch})`],
    ["parameters", f.parameters.toLocaleString("en-US")],
    ["layers / hidden / heads", `${m.numLayers} / ${m.hiddenSize} / ${m.numHeads}${m.kvHeads !== m.numHeads ? ` (${m.kvHeads} key/value heads)` : ""}`],
    ["context", `${m.maxSeqLen} tokens`],
    ["vocabulary", `${m.vocabSize} tokens${f.tokenizer ? ` (tokenizer ${f.tokenizer})` : ""}`],
    ["weights", f.dtype],
    ...(f.lora ? ([["fine-tuning", `LoRA rank ${f.lora.rank}, alpha ${f.lora.alpha} on ${f.lora.targets.join(", ")}, merged into the weights`]] as [string, string][]) : []),
  ];
  if (f.step !== undefined) rows.push(["training steps", String(f.step)]);
  if (f.data) rows.push(["data", f.data]);
  if (f.loss !== undefined) rows.push(["final training loss", f.loss.toFixed(4)]);
  if (f.valLoss !== undefined) rows.push(["final validation loss", f.valLoss.toFixed(4)]);
  const table = ["| | |", "| --- | --- |", ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join("\n");
  const tokenizerNote = f.tokenizerFiles
    ? "The folder holds the tokenizer the training data was prepared with: `AutoTokenizer.from_pretrained(\"path/to/this/folder\")` loads it."
    : f.tokenizer
      ? `This folder holds no tokenizer files: kiln writes them for its built-in gpt2 tokenizer and for tokenizer folders, not for ${f.tokenizer}. Encode input as it does${BUILTIN_ENCODINGS[f.tokenizer] ? ` (${BUILTIN_ENCODINGS[f.tokenizer]})` : ""}.`
      : "This folder holds no tokenizer files: encode input with the tokenizer the training data was prepared with.";
  return `---
library_name: transformers
tags:
- kiln
- ${m.arch}
---

# ${m.arch} model trained with kiln

${table}

## Loading

\`\`\`python
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("path/to/this/folder")
\`\`\`

${tokenizerNote}
`;
}
