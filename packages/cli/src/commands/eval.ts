import type { Command } from "commander";
import { ConfigError, DataError } from "@kiln/contract";
import { PretrainedWeights, type TokenDataset, bytesOfTokens, evaluateLoss, openTokenDataset, openTokenizer, windowStarts } from "@kiln/core";
import { openBackend } from "../train/open-backend.js";
import { positiveInt } from "./parse-flags.js";

interface EvalFlags {
  checkpoint: string;
  data: string;
  seqLen?: number;
  maxWindows?: number;
  json?: boolean;
  threads?: number;
}

/** The data's tokenizer (its sidecar's, else the weights'), to count the bytes behind the targets; undefined when neither says. */
async function bytesCounter(data: TokenDataset, weights: PretrainedWeights) {
  const s = data.sidecar;
  if (s) return bytesOfTokens(await openTokenizer(s.tokenizer_path ?? s.tokenizer), s.tokenizer);
  const tokenizer = await weights.openTokenizer();
  return tokenizer && bytesOfTokens(tokenizer, weights.tokenizer!);
}

export function registerEval(program: Command): void {
  program
    .command("eval")
    .description("measure a model's next-token loss on a token file (an example file: over the targets its loss mask trains)")
    .requiredOption("--checkpoint <path>", "a kiln checkpoint (.safetensors) or a Hugging Face model folder")
    .requiredOption("-d, --data <file>", "a token file (kiln prepare's .bin, llm.c's shards)")
    .option("--seq-len <n>", "tokens per window (default: the model's max_seq_len)", positiveInt)
    .option("--max-windows <n>", "score at most the first n windows (an example file's first n examples)", positiveInt)
    .option("--json", "print one JSON line")
    .option("--threads <n>", "CPU threads", positiveInt)
    .action(async (f: EvalFlags) => {
      const weights = await PretrainedWeights.open(f.checkpoint);
      try {
        const T = f.seqLen ?? weights.model.maxSeqLen;
        if (T > weights.model.maxSeqLen) {
          throw new ConfigError(`--seq-len ${T} is longer than the model's max_seq_len ${weights.model.maxSeqLen}`, { where: "--seq-len", hint: `pass --seq-len ${weights.model.maxSeqLen} or less` });
        }
        const data = await openTokenDataset(f.data, { vocabSize: weights.model.vocabSize });
        try {
          if (data.examples === undefined && windowStarts(data.tokenCount, T).length === 0) {
            throw new DataError(`${data.tokenCount} tokens hold no window of ${T} inputs and their ${T} next tokens`, { where: f.data, hint: `pass a --seq-len below ${data.tokenCount} or a longer file` });
          }
          const { backend } = await openBackend("cpu", { ...(f.threads ? { threads: f.threads } : {}) });
          try {
            const bytesOf = await bytesCounter(data, weights);
            const r = await evaluateLoss(backend, weights, data, { seqLen: T, ...(f.maxWindows ? { maxWindows: f.maxWindows } : {}), ...(bytesOf ? { bytesOf } : {}) });
            if (f.json) {
              process.stdout.write(`${JSON.stringify({ loss: r.loss, perplexity: r.perplexity, tokens: r.tokens, windows: r.windows, ...(r.examples ? { examples: r.windows } : {}), ...(r.bitsPerByte === undefined ? {} : { bits_per_byte: r.bitsPerByte }) })}\n`);
              return;
            }
            const rows: [string, string][] = [
              r.examples
                ? ["examples", `${r.windows}, one a window of at most ${T} tokens (${r.tokens} trained targets) from ${f.data}`]
                : ["windows", `${r.windows} of ${T} tokens (${r.tokens} targets) from ${f.data}`],
              ["loss", r.loss.toFixed(4)],
              ["perplexity", r.perplexity.toFixed(2)],
              ...(r.bitsPerByte === undefined ? [] : ([["bits per byte", r.bitsPerByte.toFixed(4)]] as [string, string][])),
            ];
            const width = Math.max(...rows.map(([k]) => k.length));
            process.stdout.write(`kiln eval ${f.checkpoint}\n${rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join("\n")}\n`);
          } finally {
            backend.dispose();
          }
        } finally {
          await data.close();
        }
      } finally {
        await weights.close();
      }
    });
}
