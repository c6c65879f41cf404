import {
  BatchSampler,
  DEFAULT_BUILTIN_CORPUS_CHARS,
  EXP_AVG,
  type ForwardRunner,
  META_DATA,
  META_DATA_CURSOR,
  META_DATA_CURSORS,
  META_STEP,
  META_TOKENIZER,
  Prefetcher,
  type SamplerCursor,
  TokenGenerator,
  type Tokenizer,
  Trainer,
  decodeSafetensors,
  encodeTrainerCheckpoint,
  generateStories,
  getTokenizer,
  isTokenizerName,
  restoreTrainerState,
  tensorSourceOfBytes,
} from "@kiln/core/browser";
import type { DataChoice, FromWorker, RunState, SampleRequest } from "./messages.js";
import { checkMemory } from "./memory-check.js";
import { memoryDataset, tokenizeDocuments } from "./page-dataset.js";
import { PageConfigError, type RunConfig, parseRunConfig } from "./run-config.js";

type Backend = Trainer["backend"];

/** The checkpoint metadata key holding the run's YAML config (as kiln train writes it). */
const META_CONFIG = "kiln.config";
/** The seed of the built-in corpus's stories (the CLI's default). */
const BUILTIN_SEED = 1;

/** A run in progress: its trainer, data and evaluation runner. */
interface Run {
  config: RunConfig;
  configText: string;
  dataName: string;
  tokenizer: Tokenizer;
  trainer: Trainer;
  prefetcher: Prefetcher;
  val: BatchSampler;
  runner: ForwardRunner;
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
    this.setState(this.run!.trainer.stepCount >= this.run!.config.maxSteps ? "done" : paused ? "paused" : "training");
    this.train();
  }

  private async open(configText: string, data: DataChoice, steps: number | undefined, checkpoint: { name: string; bytes: Uint8Array } | undefined): Promise<void> {
    const config = parseRunConfig(configText);
    if (steps !== undefined) config.maxSteps = steps;
    const device = this.backend.capabilities().device;
    const memory = checkMemory(config, device.name, device.memoryBytes);
    const tokenizer = await getTokenizer(config.tokenizer);
    if (tokenizer.vocabSize > config.model.vocabSize) {
      throw new PageConfigError(`the ${tokenizer.name} tokenizer has ${tokenizer.vocabSize} ids but model.vocab_size is ${config.model.vocabSize}`, "model.vocab_size", `raise model.vocab_size to ${tokenizer.vocabSize} or more, or use another data.tokenizer`);
    }
    const started = performance.now();
    const { name: dataName, tokens } = this.tokensOf(data, tokenizer);
    const dataset = memoryDataset(dataName, tokens);
    const common = { batchSize: config.batchSize, seqLen: config.seqLen, seed: config.seed, valFraction: config.valFraction };
    const train = new BatchSampler(dataset, { ...common, split: "train" });
    const val = new BatchSampler(dataset, { ...common, split: "val", shuffle: false });
    const trainer = new Trainer(this.backend, {
      model: config.model,
      batchSize: config.batchSize,
      seqLen: config.seqLen,
      optimizer: { beta1: config.beta1, beta2: config.beta2, eps: config.eps, weightDecay: config.weightDecay, gradClip: config.gradClip },
      schedule: { kind: config.schedule, peak: config.lr, min: config.minLr, warmupSteps: config.warmupSteps, maxSteps: config.maxSteps },
      seed: config.seed,
      recompute: config.recompute,
      loadBalanceAlpha: config.loadBalanceAlpha,
    });
    if (checkpoint) {
      try {
        const meta = await restoreTrainerState(trainer, tensorSourceOfBytes(checkpoint.bytes, checkpoint.name), checkpoint.name);
        if (meta[META_DATA_CURSOR]) train.setCursor(JSON.parse(meta[META_DATA_CURSOR]) as SamplerCursor);
      } catch (err) {
        trainer.dispose();
        throw err;
      }
    }
    const runner = trainer.forwardRunner(config.batchSize, config.seqLen);
    this.run = { config, configText, dataName, tokenizer, trainer, prefetcher: new Prefetcher(train, 2), val, runner };
    const m = config.model;
    this.log(`model   ${m.arch}, ${(trainer.layout.count / 1e6).toFixed(2)}M parameters, ${m.numLayers} layers, hidden ${m.hiddenSize}`);
    this.log(`step    ${config.batchSize} x ${config.seqLen} tokens x ${config.gradAccum} accumulation = ${config.batchSize * config.seqLen * config.gradAccum} tokens`);
    this.log(`data    ${dataName}, ${tokenizer.name} tokens: ${tokens.length.toLocaleString("en-US")} tokens, ${train.windowCount} training windows (ready in ${((performance.now() - started) / 1000).toFixed(1)} s)`);
    this.log(`memory  ${memory.description}`);
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
    if (prompt.length === 0) throw new PageConfigError("the prompt is empty", "prompt", "type some text to continue (a line break works)");
    const tokens = await generator.generate(prompt, request.maxTokens, { temperature: request.temperature, topK: request.topK, seed: request.seed }, () => true);
    this.post({ type: "sample", text: request.prompt + tokenizer.decode(tokens), tokens });
  }

  /** A training checkpoint of the run as kiln train writes one (weights, AdamW state, step, config, tokenizer, data cursor). */
  async checkpoint(): Promise<void> {
    await this.exclusive(async () => {
      const run = this.requireRun("download a checkpoint");
      const cursor = JSON.stringify(run.prefetcher.getCursor());
      const bytes = await encodeTrainerCheckpoint(run.trainer, {
        [META_DATA_CURSOR]: cursor,
        [META_DATA_CURSORS]: `[${cursor}]`,
        [META_CONFIG]: run.configText,
        [META_DATA]: run.dataName,
        [META_TOKENIZER]: run.tokenizer.name,
      });
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
        throw new PageConfigError(
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
      let windowStart = performance.now();
      let windowTokens = 0;
      while (this.state === "training" && this.run) {
        const run = this.run;
        const done = await this.exclusive(async () => {
          if (this.run !== run || this.state !== "training") return false;
          const { trainer, config } = run;
          const r = await trainer.step({ count: config.gradAccum, next: () => run.prefetcher.next() });
          windowTokens += r.tokens;
          const step = trainer.stepCount;
          if (r.nonFinite) {
            // As kiln train stops (trainer.on_nonfinite: stop); the weights are those of the step before.
            throw new TrainingFailure(`the loss or the gradients became NaN or infinite at step ${step}`, `step ${step}`, `lower the learning rate (now ${config.lr}) or keep gradient clipping on (trainer.grad_clip, now ${config.gradClip}); the weights are those of step ${step - 1}`);
          }
          // The first step is logged too: the chart starts from the untrained loss.
          if (step === 1 || step % config.logInterval === 0 || step === config.maxSteps) {
            const seconds = (performance.now() - windowStart) / 1000;
            this.post({ type: "metrics", line: { step, loss: r.loss, grad_norm: r.gradNorm, learning_rate: r.lr, "tokens/s": windowTokens / seconds } });
            windowStart = performance.now();
            windowTokens = 0;
          }
          if (step % config.evalInterval === 0 || step === config.maxSteps) this.post({ type: "val", step, val_loss: await this.evaluate(run) });
          return step >= config.maxSteps;
        });
        if (done) this.setState("done");
        // Let the worker read its messages (pause, sample, checkpoint) between steps.
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (this.state === "training") continue;
        windowStart = performance.now();
        windowTokens = 0;
      }
    } finally {
      this.looping = false;
    }
  }

  /** Mean loss over the first eval_iters validation batches (the CLI's evaluation). */
  private async evaluate(run: Run): Promise<number> {
    run.val.setCursor({ epoch: 0, index: 0 });
    const batch = run.val.allocateBatch();
    let loss = 0;
    let rows = 0;
    for (let i = 0; i < run.config.evalIters; i++) {
      await run.val.next(batch);
      loss += await run.runner.run(batch.ids, batch.targets);
      for (const t of batch.targets) if (t >= 0) rows++;
    }
    return rows > 0 ? loss / rows : 0;
  }

  private requireRun(what: string): Run {
    if (!this.run) throw new PageConfigError(`there are no weights to ${what} yet`, what, "start training, or load a checkpoint");
    return this.run;
  }

  private stopRun(): void {
    this.weights?.generator.dispose();
    this.weights = undefined;
    if (!this.run) return;
    void this.run.prefetcher.close();
    this.run.runner.dispose();
    this.run.trainer.dispose();
    this.run = undefined;
  }

  private setState(state: RunState): void {
    this.state = state;
    this.post({ type: "state", state, step: this.run?.trainer.stepCount ?? 0, maxSteps: this.run?.config.maxSteps ?? 0 });
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

/** Training that cannot go on (kiln train's TrainingError). */
class TrainingFailure extends Error {
  constructor(
    message: string,
    readonly where: string,
    readonly hint: string,
  ) {
    super(message);
    this.name = "TrainingError";
  }
}
