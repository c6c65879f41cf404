import type { EmbeddingBackwardArgs, EmbeddingForwardArgs } from "../kernels/embedding.js";
import type { OracleKernel } from "./types.js";
import { checkIndex } from "./check-index.js";

export const embeddingForwardOracle: OracleKernel<EmbeddingForwardArgs> = (a, v) => {
  for (let i = 0; i < a.count; i++) {
    const id = checkIndex("embeddingForward", v.ids[i], a.vocab, i);
    for (let j = 0; j < a.dim; j++) v.out[i * a.dim + j] = v.table[id * a.dim + j];
  }
};

export const embeddingBackwardOracle: OracleKernel<EmbeddingBackwardArgs> = (a, v) => {
  for (let i = 0; i < a.count; i++) {
    const id = checkIndex("embeddingBackward", v.ids[i], a.vocab, i);
    for (let j = 0; j < a.dim; j++) v.dTable[id * a.dim + j] += v.dOut[i * a.dim + j];
  }
};
