import { DEFAULT_LOAD_BALANCE_ALPHA, MODEL_YAML_KEYS, type ModelConfig, type RecomputeSetting, type TokenizerName, isTokenizerName, resolveModelConfig } from "@kiln/core/browser";
import { parse } from "yaml";

/** A training run as the page runs it: a kiln YAML config (the CLI's keys and defaults) resolved. */
export interface RunConfig {
  model: ModelConfig;
  batchSize: number;
  seqLen: number;
  gradAccum: number;
  maxSteps: number;
  lr: number;
  minLr: number;
  warmupSteps: number;
  schedule: "cosine" | "linear" | "constant";
  weightDecay: number;
  beta1: number;
  beta2: number;
  eps: number;
  gradClip: number;
  logInterval: number;
  evalInterval: number;
  evalIters: number;
  seed: number;
  recompute: RecomputeSetting;
  /** Mixture of experts: weight of the load-balancing loss. */
  loadBalanceAlpha: number;
  tokenizer: TokenizerName;
  valFraction: number;
}

/** A config the page cannot run, with the key at fault and what to do. */
export class PageConfigError extends Error {
  constructor(
    message: string,
    readonly where: string,
    readonly hint: string,
  ) {
    super(message);
    this.name = "ConfigError";
  }
}

/** The YAML model keys and the ModelConfig fields they set (the CLI's names). */
const MODEL_KEYS: Record<string, keyof ModelConfig> = MODEL_YAML_KEYS;

type Section = Record<string, unknown>;

function section(doc: Section, name: string): Section {
  const s = doc[name];
  if (s === undefined || s === null) return {};
  if (typeof s !== "object" || Array.isArray(s)) throw new PageConfigError(`${name} is not a mapping`, name, `write ${name}: followed by indented keys`);
  return s as Section;
}

function num(s: Section, where: string, key: string, fallback: number | undefined, check: (n: number) => boolean = (n) => n > 0): number {
  const v = s[key];
  if (v === undefined || v === null) {
    if (fallback === undefined) throw new PageConfigError(`${where}.${key} is missing`, `${where}.${key}`, `set ${where}.${key} (models/ has complete configs)`);
    return fallback;
  }
  if (typeof v !== "number" || !Number.isFinite(v) || !check(v)) throw new PageConfigError(`${where}.${key} is ${JSON.stringify(v)}, which is out of range`, `${where}.${key}`, "see models/nano-start.yaml for values that train");
  return v;
}

const int = (n: number) => Number.isSafeInteger(n) && n > 0;

function choice<T extends string>(s: Section, where: string, key: string, options: readonly T[], fallback: T): T {
  const v = s[key] ?? fallback;
  if (!options.includes(v as T)) throw new PageConfigError(`${where}.${key} is ${JSON.stringify(v)}`, `${where}.${key}`, `use one of ${options.join(", ")}`);
  return v as T;
}

/** Parses a kiln YAML config (model, trainer and data sections) with the CLI's defaults. */
export function parseRunConfig(text: string): RunConfig {
  let doc: unknown;
  try {
    doc = parse(text) ?? {};
  } catch (err) {
    throw new PageConfigError(`the config is not valid YAML: ${(err as Error).message}`, "config", "fix the YAML, or pick a ready config");
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new PageConfigError("the config is not a YAML mapping", "config", "start from a ready config");
  const m = section(doc as Section, "model");
  const t = section(doc as Section, "trainer");
  const d = section(doc as Section, "data");
  if (Object.keys(m).length === 0) throw new PageConfigError("the config has no model section", "model", "add model: with vocab_size, hidden_size, num_layers, num_heads and max_seq_len");
  const input: Record<string, unknown> = { arch: "llama" };
  for (const [key, value] of Object.entries(m)) {
    const field = MODEL_KEYS[key];
    if (field === undefined) throw new PageConfigError(`model.${key} is not a model key`, `model.${key}`, `model keys: ${Object.keys(MODEL_KEYS).join(", ")}`);
    input[field] = value;
  }
  for (const key of ["vocab_size", "hidden_size", "num_layers", "num_heads", "max_seq_len"]) num(m, "model", key, undefined, int);
  let model: ModelConfig;
  try {
    model = resolveModelConfig(input as never);
  } catch (err) {
    const e = err as Error & { where?: string; hint?: string };
    throw new PageConfigError(e.message, e.where ?? "model", e.hint ?? "check the model section");
  }
  const lr = num(t, "trainer", "learning_rate", 3e-4);
  const seqLen = num(t, "trainer", "seq_len", model.maxSeqLen, int);
  if (seqLen > model.maxSeqLen) throw new PageConfigError(`seq_len ${seqLen} is longer than model.max_seq_len ${model.maxSeqLen}`, "trainer.seq_len", `use ${model.maxSeqLen} or less, or raise model.max_seq_len`);
  const tokenizer = (d.tokenizer ?? "bytes") as string;
  if (!isTokenizerName(tokenizer)) throw new PageConfigError(`data.tokenizer is ${JSON.stringify(tokenizer)}`, "data.tokenizer", "the page has the built-in tokenizers: bytes, gpt2, cl100k, o200k");
  const dtype = t.dtype ?? "f32";
  if (dtype !== "f32") throw new PageConfigError(`trainer.dtype is ${JSON.stringify(dtype)}; the page trains in f32`, "trainer.dtype", "remove trainer.dtype, or train with kiln train for bf16/f16");
  const positiveOrZero = (n: number) => n >= 0;
  return {
    model,
    batchSize: num(t, "trainer", "batch_size", 8, int),
    seqLen,
    gradAccum: num(t, "trainer", "gradient_accumulation", 1, int),
    maxSteps: num(t, "trainer", "max_steps", 1000, int),
    lr,
    minLr: num(t, "trainer", "min_learning_rate", lr / 10, positiveOrZero),
    warmupSteps: num(t, "trainer", "warmup_steps", 0, (n) => Number.isSafeInteger(n) && n >= 0),
    schedule: choice(t, "trainer", "lr_schedule", ["cosine", "linear", "constant"] as const, "cosine"),
    weightDecay: num(t, "trainer", "weight_decay", 0.1, positiveOrZero),
    beta1: num(t, "trainer", "beta1", 0.9, (n) => n >= 0 && n < 1),
    beta2: num(t, "trainer", "beta2", 0.95, (n) => n >= 0 && n < 1),
    eps: num(t, "trainer", "eps", 1e-8),
    gradClip: num(t, "trainer", "grad_clip", 1.0, positiveOrZero),
    logInterval: num(t, "trainer", "log_interval", 10, int),
    evalInterval: num(t, "trainer", "eval_interval", 200, int),
    evalIters: num(t, "trainer", "eval_iters", 10, int),
    seed: num(t, "trainer", "seed", 1337, (n) => Number.isSafeInteger(n) && n >= 0),
    recompute: choice(t, "trainer", "recompute", ["auto", "none", "cheap", "blocks"] as const, "auto"),
    loadBalanceAlpha: num(t, "trainer", "load_balance_alpha", DEFAULT_LOAD_BALANCE_ALPHA, positiveOrZero),
    tokenizer,
    valFraction: num(d, "data", "val_fraction", 0.01, (n) => n >= 0 && n < 1),
  };
}
