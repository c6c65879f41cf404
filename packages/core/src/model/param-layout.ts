import { type FloatDType, bytesPerElement } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import { alignUp } from "../plan/pack-arena.js";
import { type ModelConfig, headDim } from "./config.js";

/** How a parameter starts: N(0, std^2), all ones, or all zeros. */
export type ParamInit = { kind: "normal"; std: number } | { kind: "ones" } | { kind: "zeros" };

export interface ParamSpec {
  /** Hugging Face tensor name. */
  name: string;
  shape: number[];
  /** Weight decay applies (matrices); not to norms, biases and embeddings. */
  decay: boolean;
  init: ParamInit;
}

/** Every parameter of a model, in a fixed order, with byte offsets in one flat buffer. */
export interface ParamLayout {
  specs: ParamSpec[];
  offsets: Map<string, number>;
  dtype: FloatDType;
  /** Bytes of the flat buffer (each parameter 64-byte aligned). */
  bytes: number;
  /** Total parameter count. */
  count: number;
}

function gpt2Params(c: ModelConfig): ParamSpec[] {
  const C = c.hiddenSize, F = c.intermediateSize;
  const w = (name: string, shape: number[], std = 0.02): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std } });
  const b = (name: string, n: number): ParamSpec => ({ name, shape: [n], decay: false, init: { kind: "zeros" } });
  const ln = (p: string): ParamSpec[] => [{ name: `${p}.weight`, shape: [C], decay: false, init: { kind: "ones" } }, b(`${p}.bias`, C)];
  // GPT-2 scales the init of projections into the residual stream by 1/sqrt(2 * layers).
  const proj = 0.02 / Math.sqrt(2 * c.numLayers);
  const specs: ParamSpec[] = [
    { name: "transformer.wte.weight", shape: [c.vocabSize, C], decay: false, init: { kind: "normal", std: 0.02 } },
    { name: "transformer.wpe.weight", shape: [c.maxSeqLen, C], decay: false, init: { kind: "normal", std: 0.02 } },
  ];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `transformer.h.${i}`;
    specs.push(
      ...ln(`${p}.ln_1`),
      w(`${p}.attn.c_attn.weight`, [C, 3 * C]),
      b(`${p}.attn.c_attn.bias`, 3 * C),
      w(`${p}.attn.c_proj.weight`, [C, C], proj),
      b(`${p}.attn.c_proj.bias`, C),
      ...ln(`${p}.ln_2`),
      w(`${p}.mlp.c_fc.weight`, [C, F]),
      b(`${p}.mlp.c_fc.bias`, F),
      w(`${p}.mlp.c_proj.weight`, [F, C], proj),
      b(`${p}.mlp.c_proj.bias`, C),
    );
  }
  specs.push(...ln("transformer.ln_f"));
  if (!c.tieEmbeddings) specs.push(w("lm_head.weight", [c.vocabSize, C]));
  return specs;
}

function llamaParams(c: ModelConfig): ParamSpec[] {
  const C = c.hiddenSize, D = headDim(c), F = c.intermediateSize;
  const w = (name: string, shape: number[]): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std: 0.02 } });
  const norm = (name: string): ParamSpec => ({ name, shape: [C], decay: false, init: { kind: "ones" } });
  const specs: ParamSpec[] = [{ name: "model.embed_tokens.weight", shape: [c.vocabSize, C], decay: false, init: { kind: "normal", std: 0.02 } }];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push(
      norm(`${p}.input_layernorm.weight`),
      w(`${p}.self_attn.q_proj.weight`, [c.numHeads * D, C]),
      w(`${p}.self_attn.k_proj.weight`, [c.kvHeads * D, C]),
      w(`${p}.self_attn.v_proj.weight`, [c.kvHeads * D, C]),
      w(`${p}.self_attn.o_proj.weight`, [C, c.numHeads * D]),
      norm(`${p}.post_attention_layernorm.weight`),
      w(`${p}.mlp.gate_proj.weight`, [F, C]),
      w(`${p}.mlp.up_proj.weight`, [F, C]),
      w(`${p}.mlp.down_proj.weight`, [C, F]),
    );
  }
  specs.push(norm("model.norm.weight"));
  if (!c.tieEmbeddings) specs.push(w("lm_head.weight", [c.vocabSize, C]));
  return specs;
}

/** The parameters of `config`, laid out in one flat buffer of `dtype`. */
export function paramLayout(config: ModelConfig, dtype: FloatDType = "f32"): ParamLayout {
  const specs = config.arch === "gpt2" ? gpt2Params(config) : llamaParams(config);
  const offsets = new Map<string, number>();
  let bytes = 0;
  let count = 0;
  for (const s of specs) {
    offsets.set(s.name, bytes);
    const n = elementCount(s.shape);
    count += n;
    bytes += alignUp(n * bytesPerElement(dtype));
  }
  return { specs, offsets, dtype, bytes, count };
}
