import { type Llama, type LlamaContext, type LlamaModel, getLlama } from "node-llama-cpp";

/**
 * llama.cpp as people run GGUF files, through node-llama-cpp's prebuilt CPU build (no
 * build from source, no download): tokenization, greedy completion, next-token logits.
 */
export class LlamaCpp {
  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
  ) {}

  private static llama: Promise<Llama> | undefined;

  static async load(file: string, contextSize = 64): Promise<LlamaCpp> {
    LlamaCpp.llama ??= getLlama({ gpu: false, build: "never", logLevel: "error" } as Parameters<typeof getLlama>[0]);
    const model = await (await LlamaCpp.llama).loadModel({ modelPath: file });
    // One thread: on a small model, llama.cpp's threads wait on each other longer than they compute.
    const context = await model.createContext({ contextSize, sequences: 1, threads: 1 });
    return new LlamaCpp(model, context);
  }

  /** The text's tokens, without BOS or special-token parsing. */
  tokenize(text: string): number[] {
    return [...this.model.tokenize(text)];
  }

  detokenize(ids: readonly number[]): string {
    return this.model.detokenize(ids as Parameters<LlamaModel["detokenize"]>[0]);
  }

  /** `n` greedy tokens after `prompt`'s tokens, and their text. */
  async greedy(prompt: readonly number[], n: number): Promise<{ ids: number[]; text: string }> {
    const seq = this.context.getSequence();
    try {
      const ids: number[] = [];
      for await (const t of seq.evaluate(prompt as Parameters<typeof seq.evaluate>[0], { temperature: 0 })) {
        ids.push(t);
        if (ids.length >= n) break;
      }
      return { ids, text: this.detokenize(ids) };
    } finally {
      seq.dispose();
    }
  }

  /** The raw next-token logits after `tokens`, by token id (vocabSize of them). */
  async nextLogits(tokens: readonly number[], vocabSize: number): Promise<Float32Array> {
    const seq = this.context.getSequence();
    try {
      const last = tokens.length - 1;
      const input = tokens.map((t, i) => (i === last ? ([t, { generateNext: { logits: true } }] as const) : t));
      const out = await seq.controlledEvaluate(input as Parameters<typeof seq.controlledEvaluate>[0]);
      const logits = out[last]?.next?.logits;
      if (!logits) throw new Error("llama.cpp returned no logits");
      const values = new Float32Array(vocabSize);
      for (const [id, v] of logits) values[id] = v;
      return values;
    } finally {
      seq.dispose();
    }
  }

  async dispose(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}

/** max |a - b| over max |b|: the error relative to the logits' scale. */
export function relativeError(a: Float32Array, b: Float32Array): number {
  let err = 0, scale = 0;
  for (let i = 0; i < b.length; i++) {
    err = Math.max(err, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return err / scale;
}
