import {
  BatchSampler,
  DEFAULT_BUILTIN_CORPUS_CHARS,
  EXP_AVG,
  META_CONFIG,
  META_DATA,
  META_STEP,
  META_TOKENIZER,
  TokenGenerator,
  type Tokenizer,
  type Trainer,
  TrainingRun,
  formatBytes,
  decodeSafetensors,
  encodeTrainerCheckpoint,
  generateStories,
  getTokenizer,
  isTokenizerName,
  restoreTrainerState,
  tensorSourceOfBytes,
} from "@kiln/core/browser";
import type { DataChoice, FromWorker, RunState, SampleRequest } from "./messages.js";
import { memoryDataset, tokenizeDocuments } from "./page-dataset.js";
import { ConfigError } from "@kiln/contract";
import { type RunConfig, parseRunConfig } from "./run-config.js";

type Backend = Trainer["backend"];

/** The seed of the built-in corpus's stories (the CLI's default). */
const BUILTIN_SEED = 1;

/** A run in progress: core's training run and what the page shows of it. */
interface Run {
  config: RunConfig;
  tokenizer: Tokenizer;
  training: TrainingRun;
  trainer: Trainer;
}

/**
 * Trains and samples inside a worker: one backend for the worker's life, one run at a
 * time. Steps, samples and checkpoints take turns (never two on the backend at once);
 * between two steps the worker reads its messages, so pause and sample answer at once.
 */
export class PageTraining {
  private run: Run | undefined;
  private state: RunState = "idle";
  private turn: Promise<unknown> = Promise.resolve();
  private looping = false;
  /** Trained weights loaded without their run (final.safetensors), to sample from. */
  private weights: { generator: TokenGenerator; tokenizer: Tokenizer; name: string } | undefined;
  private lastTokens: { tokenizer: string; text: string | undefined; tokens: Uint32Array } | undefined;

  constructor(
    private readonly backend: Backend,
    private readonly post: (message: FromWorker, transfer?: Transferable[]) => void,
  ) {}

  /** Starts a new run from a YAML config (`steps` overrides trainer.max_steps) on `data`; a checkpoint's state when given. */
  async start(configText: string, data: DataChoice, steps?: number, checkpoint?: { name: string; bytes: Uint8Array }, paused = false): Promise<void> {
    await this.exclusive(async () => {
      this.stopRun();
      this.setState("preparing");
      try {
        await this.open(configText, data, steps, checkpoint);
      } catch (err) {
        this.setState("idle");
        throw err;
      }
    });
    this.setState(this.run!.training.done ? "done" : paused ? "paused" : "training");
    this.train();
  }

  private async open(configText: string, data: DataChoice, steps: number | undefined, checkpoint: { name: string; bytes: Uint8Array } | undefined): Promise<void> {
    const { config, ignored } = parseRunConfig(configText, steps);
    const tokenizer = await getTokenizer(config.tokenizer ?? "bytes");
    if (tokenizer.vocabSize > config.model.vocabSize) {
      throw configError(`the ${tokenizer.name} tokenizer has ${tokenizer.vocabSize} ids but model.vocab_size is ${config.model.vocabSize}`, "model.vocab_size", `raise model.vocab_size to ${tokenizer.vocabSize} or more, or use another data.tokenizer`);
    }
    const started = performance.now();
    const { name: dataName, tokens } = this.tokensOf(data, tokenizer);
    const dataset = memoryDataset(dataName, tokens);
    const common = { batchSize: config.batchSize, seqLen: config.seqLen, seed: config.seed, valFraction: config.valFraction };
    const train = new BatchSampler(dataset, { ...common, split: "train" });
    const val = new BatchSampler(dataset, { ...common, split: "val", shuffle: false });
    // Planned once, refused with advice before anything is allocated when the tab's memory cannot hold it.
    const training = new TrainingRun({ settings: config, backend: this.backend, dtype: "f32", data: { train, val }, logFirstStep: true, describeData: { [META_DATA]: dataName, [META_TOKENIZER]: tokenizer.name } });
    const trainer = training.trainer;
    if (checkpoint) {
      try {
        await training.resumed(await restoreTrainerState(trainer, tensorSourceOfBytes(checkpoint.bytes, checkpoint.name), checkpoint.name));
      } catch (err) {
        await training.dispose();
        throw err;
      }
    }
    this.run = { config, tokenizer, training, trainer };
    const m = config.model;
    const { plan } = training;
    const parts = [`parameters ${formatBytes(plan.memory.parameters)}`, `gradients ${formatBytes(plan.memory.gradients)}`, `AdamW ${formatBytes(plan.memory.optimizerState)}`, `activations ${formatBytes(plan.memory.activations)} (recompute: ${plan.recompute}${config.recompute === "auto" ? ", auto" : ""})`, `evaluation ${formatBytes(plan.memory.evaluation)}`];
    this.log(`model   ${m.arch}, ${(trainer.layout.count / 1e6).toFixed(2)}M parameters, ${m.numLayers} layers, hidden ${m.hiddenSize}`);
    this.log(`step    ${config.batchSize} x ${config.seqLen} tokens x ${config.gradAccum} accumulation = ${config.batchSize * config.seqLen * config.gradAccum} tokens`);
    this.log(`data    ${dataName}, ${tokenizer.name} tokens: ${tokens.length.toLocaleString("en-US")} tokens, ${train.windowCount} training windows (ready in ${((performance.now() - started) / 1000).toFixed(1)} s)`);
    this.log(`memory  ${formatBytes(plan.need)} of ${formatBytes(plan.available)} (${((100 * plan.need) / plan.available).toFixed(1)}%): ${parts.join(", ")}`);
    if (ignored.length > 0) this.log(`note    the page leaves aside ${ignored.join(", ")} (kiln train reads them)`);
    if (checkpoint) this.log(`resumed from ${checkpoint.name} at step ${trainer.stepCount}`);
  }

  /** The training text as tokens; the last one is kept, so starting again on the same data does not tokenize it again. */
  private tokensOf(data: DataChoice, tokenizer: Tokenizer): { name: string; tokens: Uint32Array } {
    const name = data.kind === "builtin" ? "kiln's built-in story corpus" : data.name;
    const text = data.kind === "text" ? data.text : undefined;
    const last = this.lastTokens;
    if (!last || last.tokenizer !== tokenizer.name || last.text !== text) {
      const tokens = text === undefined ? tokenizeDocuments(generateStories(BUILTIN_SEED, DEFAULT_BUILTIN_CORPUS_CHARS), tokenizer) : tokenizeDocuments([text], tokenizer);
      this.lastTokens = { tokenizer: tokenizer.name, text, tokens };
    }
    return { name, tokens: this.lastTokens!.tokens };
  }

  pause(): void {
    if (this.state === "training") this.setState("paused");
  }

  resume(): void {
    if (this.state !== "paused") return;
    this.setState("training");
    this.train();
  }

  /** Text generated from the current weights, as kiln sample generates it from a checkpoint of them. */
  async sample(request: SampleRequest): Promise<void> {
    await this.exclusive(async () => {
      if (this.run) {
        const bytes = await encodeTrainerCheckpoint(this.run.trainer);
        const generator = await TokenGenerator.fromTensors(this.backend, tensorSourceOfBytes(bytes), "the current weights");
        try {
          await this.generate(generator, this.run.tokenizer, request);
        } finally {
          generator.dispose();
        }
      } else if (this.weights) {
        await this.generate(this.weights.generator, this.weights.tokenizer, request);
      } else {
        this.requireRun("sample");
      }
    });
  }

  private async generate(generator: TokenGenerator, tokenizer: Tokenizer, request: SampleRequest): Promise<void> {
    const prompt = tokenizer.encode(request.prompt);
    if (prompt.length === 0) throw configError("the prompt is empty", "prompt", "type some text to continue (a line break works)");
    const tokens = await generator.generate(prompt, request.maxTokens, { temperature: request.temperature, topK: request.topK, seed: request.seed }, () => true);
    this.post({ type: "sample", text: request.prompt + tokenizer.decode(tokens), tokens });
  }

  /** A training checkpoint of the run as kiln train writes one (weights, AdamW state, step, config, tokenizer, data cursor). */
  async checkpoint(): Promise<void> {
    await this.exclusive(async () => {
      const run = this.requireRun("download a checkpoint");
      const bytes = await encodeTrainerCheckpoint(run.trainer, run.training.metadata());
      this.post({ type: "checkpoint", name: `step_${run.trainer.stepCount}.safetensors`, bytes }, [bytes.buffer as ArrayBuffer]);
    });
  }

  /**
   * A checkpoint from this page or from kiln train: a training checkpoint (step_N: weights,
   * AdamW state and config) continues its run, paused at its step; trained weights alone
   * (final.safetensors) are loaded to sample from, as kiln sample does.
   */
  async load(name: string, bytes: Uint8Array, data: DataChoice): Promise<void> {
    const source = tensorSourceOfBytes(bytes, name);
    const configText = source.metadata[META_CONFIG];
    const training = [...decodeSafetensors(bytes, name).tensors.keys()].some((n) => n.startsWith(EXP_AVG));
    if (configText !== undefined && training) {
      await this.start(configText, data, undefined, { name, bytes }, true);
      return;
    }
    await this.exclusive(async () => {
      const recorded = source.metadata[META_TOKENIZER];
      if (recorded === undefined || !isTokenizerName(recorded)) {
        throw configError(
          recorded === undefined ? `${name} does not say which tokenizer its data used` : `${name} was trained with the tokenizer ${recorded}, which the page does not have`,
          name,
          "the page samples checkpoints of data tokenized by bytes, gpt2, cl100k or o200k",
        );
      }
      const generator = await TokenGenerator.fromTensors(this.backend, source, name);
      this.stopRun();
      this.weights = { generator, tokenizer: await getTokenizer(recorded), name };
      this.log(`loaded ${name}: trained weights (step ${source.metadata[META_STEP] ?? "?"}), to sample from`);
      this.setState("loaded");
    });
  }

  /** Trains while the state is "training"; a failure pauses the run and is reported. */
  private train(): void {
    this.loop().catch((err: unknown) => {
      this.post(errorMessage(err));
      if (this.state === "training") this.setState("paused");
    });
  }

  private async loop(): Promise<void> {
    if (this.looping) return;
    this.looping = true;
    try {
      this.run?.training.restartWindow();
      while (this.state === "training" && this.run) {
        const run = this.run;
        const done = await this.exclusive(async () => {
          if (this.run !== run || this.state !== "training") return false;
          // A NaN or infinite step stops the run as kiln train does (TrainingError); trainer.on_nonfinite: skip skips it.
          const report = await run.training.step();
          const { step, result: r, window } = report;
          // The first step is logged too: the chart starts from the untrained loss.
          if (window) this.post({ type: "metrics", line: { step, loss: r.loss, grad_norm: r.gradNorm, learning_rate: r.lr, "tokens/s": window.tokens / window.seconds } });
          if (report.eval) this.post({ type: "val", step, val_loss: report.eval.valLoss });
          if (report.earlyStop) this.log(report.earlyStop);
          return run.training.done;
        });
        if (done) this.setState("done");
        // Let the worker read its messages (pause, sample, checkpoint) between steps; waiting does not count in tokens/s.
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (this.state !== "training") run.training.restartWindow();
      }
    } finally {
      this.looping = false;
    }
  }

  private requireRun(what: string): Run {
    if (!this.run) throw configError(`there are no weights to ${what} yet`, what, "start training, or load a checkpoint");
    return this.run;
  }

  private stopRun(): void {
    this.weights?.generator.dispose();
    this.weights = undefined;
    if (!this.run) return;
    void this.run.training.dispose();
    this.run = undefined;
  }

  private setState(state: RunState): void {
    this.state = state;
    this.post({ type: "state", state, step: this.run?.trainer.stepCount ?? 0, maxSteps: this.run?.training.totalSteps ?? 0 });
  }

  private log(text: string): void {
    this.post({ type: "log", text });
  }

  /** Runs `work` when the work before it has finished. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.turn.then(work);
    this.turn = result.catch(() => undefined);
    return result;
  }
}

/** An error as the page shows it (a KilnError's name, where and what to do, when it has them). */
export function errorMessage(err: unknown): FromWorker {
  const e = err as Error & { where?: string; hint?: string };
  return { type: "error", name: e?.name ?? "Error", message: e?.message ?? String(err), ...(e?.where ? { where: e.where } : {}), ...(e?.hint ? { hint: e.hint } : {}) };
}

/** A ConfigError naming what is at fault on the page. */
function configError(message: string, where: string, hint: string): ConfigError {
  return new ConfigError(message, { where, hint });
}
