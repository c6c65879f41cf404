import type { Command } from "commander";
import { CheckpointError, ConfigError } from "@kiln/contract";
import { stat } from "node:fs/promises";
import { chatPrompt, type ChatPrompt } from "../sample/chat-prompt.js";
import { InferenceSession, META_CHAT_TEMPLATE, META_TOKENIZER, META_TOKENIZER_FILES, PretrainedWeights, TOKENIZER_NAMES, TokenGenerator, isGgufFile, openGgufWeights, openTokenizer, tokenizerOfCheckpoint } from "@kiln/core";
import { openBackend } from "../train/open-backend.js";
import { nonNegativeInt, positiveInt } from "./parse-flags.js";

interface SampleFlags {
  checkpoint: string;
  prompt: string;
  maxTokens: number;
  temperature: number;
  topK: number;
  seed: number;
  tokenizer?: string;
  threads?: number;
  chat?: boolean;
  messages?: string;
  chatTemplate?: string;
}

function temperature(value: string): number {
  const t = Number(value);
  if (!Number.isFinite(t) || t < 0) throw new Error(`expected a temperature >= 0, got "${value}"`);
  return t;
}

/** A checkpoint file runs in its stored dtype; a Hugging Face folder and a GGUF file (dequantized) in f32. */
async function openSession(backend: Parameters<typeof InferenceSession.fromCheckpoint>[0], location: string): Promise<TokenGenerator> {
  const isFolder = await stat(location).then((s) => s.isDirectory(), () => false);
  if (!isFolder && (await isGgufFile(location))) return TokenGenerator.fromTensors(backend, await openGgufWeights(location), location);
  if (!isFolder) return InferenceSession.fromCheckpoint(backend, location);
  const weights = await PretrainedWeights.open(location);
  try {
    return await InferenceSession.fromWeights(backend, weights);
  } finally {
    await weights.close();
  }
}

/** How many characters at the end of `text` begin `marker` (and may yet become it). */
function heldBack(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) if (marker.startsWith(text.slice(text.length - n))) return n;
  return 0;
}

export function registerSample(program: Command): void {
  program
    .command("sample")
    .description("generate text from a checkpoint")
    .requiredOption("--checkpoint <path>", "a .safetensors written by kiln train, a Hugging Face model folder, or a .gguf written by kiln export")
    .option("--prompt <text>", "text to continue", "\n")
    .option("--max-tokens <n>", "tokens to generate", positiveInt, 200)
    .option("--temperature <t>", "0 = greedy; higher = more varied", temperature, 0.8)
    .option("--top-k <k>", "sample among the k most likely tokens (0 = all)", nonNegativeInt, 40)
    .option("--seed <n>", "sampling seed", nonNegativeInt, 0)
    .option("--tokenizer <name>", `override the checkpoint's tokenizer: ${TOKENIZER_NAMES.join(", ")}, or a Hugging Face tokenizer folder`)
    .option("--threads <n>", "CPU threads", positiveInt)
    .option("--chat", "answer as the assistant: --prompt is the user's message (or --messages a conversation), rendered with the tokenizer's chat template; prints the reply, stopping at the end of the turn")
    .option("--messages <file>", "with --chat: a JSON file of the conversation so far, [{\"role\", \"content\"}, ...] or {\"messages\": [...]}")
    .option("--chat-template <file>", "with --chat: a Jinja chat template in place of the tokenizer's")
    .action(async (f: SampleFlags, command: Command) => {
      if (!f.chat && (f.messages !== undefined || f.chatTemplate !== undefined)) {
        throw new ConfigError(`${f.messages !== undefined ? "--messages" : "--chat-template"} needs --chat`, { where: f.messages !== undefined ? "--messages" : "--chat-template", hint: "Add --chat to answer as the assistant." });
      }
      const { backend } = await openBackend("cpu", { ...(f.threads ? { threads: f.threads } : {}) });
      try {
        const session = await openSession(backend, f.checkpoint);
        const recorded = session.metadata[META_TOKENIZER];
        if (f.tokenizer === undefined && recorded === undefined) {
          throw new CheckpointError("the checkpoint does not say which tokenizer its data used", {
            where: f.checkpoint,
            hint: `pass --tokenizer ${TOKENIZER_NAMES.join("|")} or a tokenizer folder`,
          });
        }
        const tokenizer = f.tokenizer !== undefined ? await openTokenizer(f.tokenizer) : await tokenizerOfCheckpoint(recorded!, session.metadata[META_TOKENIZER_FILES], f.checkpoint);
        const promptGiven = command.getOptionValueSource("prompt") === "cli";
        const chat: ChatPrompt | undefined = f.chat ? await chatPrompt(tokenizer, { ...(promptGiven ? { prompt: f.prompt } : {}), messages: f.messages, chatTemplate: f.chatTemplate, checkpoint: f.checkpoint, recorded: session.metadata[META_CHAT_TEMPLATE] }) : undefined;
        const prompt = tokenizer.encode(chat?.text ?? f.prompt);
        const outside = prompt.find((id) => id >= session.model.vocabSize);
        if (outside !== undefined) {
          throw new CheckpointError(`the tokenizer ${tokenizer.name} encodes the prompt into id ${outside}, outside the model's vocab_size ${session.model.vocabSize}: it is not the tokenizer the model was trained with`, {
            where: f.checkpoint,
            hint: f.tokenizer !== undefined ? "Leave --tokenizer out to use the checkpoint's, or give the one the model was trained with." : "Pass the tokenizer the model was trained with: --tokenizer NAME or a tokenizer folder.",
          });
        }
        if (chat === undefined) process.stdout.write(f.prompt);
        const generated: number[] = [];
        let printed = "";
        // The continuation is decoded after the prompt's tokens, not alone: decoders that
        // join words with spaces or turn a leading "▁" into one (SentencePiece) drop the
        // separator at the start of a text.
        const promptText = tokenizer.decode(prompt);
        const continuation = () => {
          const whole = tokenizer.decode([...prompt, ...generated]);
          return whole.startsWith(promptText) ? whole.slice(promptText.length) : tokenizer.decode(generated);
        };
        await session.generate(prompt, f.maxTokens, { temperature: f.temperature, topK: f.topK, seed: f.seed }, (id) => {
          if (chat !== undefined && chat.endIds.includes(id)) return false;
          generated.push(id);
          let text = continuation();
          const end = chat?.endText ? text.indexOf(chat.endText) : -1;
          if (end >= 0) text = text.slice(0, end);
          // Print only complete characters: a multi-byte character may span tokens; in a chat,
          // hold back what may be the start of the end-of-turn text.
          let stable = text.endsWith("\uFFFD") ? text.slice(0, -1) : text;
          if (chat?.endText && end < 0) stable = stable.slice(0, stable.length - heldBack(stable, chat.endText));
          if (stable.length > printed.length) {
            process.stdout.write(stable.slice(printed.length));
            printed = stable;
          }
          return end < 0;
        });
        process.stdout.write("\n");
        session.dispose();
      } finally {
        backend.dispose();
      }
    });
}
