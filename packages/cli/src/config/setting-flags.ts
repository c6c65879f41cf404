import { type Command, InvalidArgumentError, Option } from "commander";
import { parse as parseYamlScalar } from "yaml";
import { z } from "zod";
import { type KilnConfig, dataSchema, modelSchema, trainerSchema } from "./schema.js";

/** The commands that take setting flags. */
export type SettingCommand = "train" | "estimate";

/**
 * A config key that can also be set by a flag: the flag's value is parsed and checked
 * by the key's own schema, so a flag accepts exactly what the YAML key accepts.
 */
export interface SettingFlag {
  /** The YAML key: `section.key`. */
  key: `${"model" | "trainer" | "data"}.${string}`;
  /** commander's flag spelling with its value name, e.g. "--batch-size <n>". */
  flags: string;
  description: string;
  /** Other spellings of the flag (the key's own name where the flag differs, and common short forms). */
  aliases?: readonly string[];
  /** Commands other than train that take it. */
  also?: readonly SettingCommand[];
}

/**
 * Every flag that sets a config key, and so every key that has a flag. Keys left out on
 * purpose: the model's shape (the config file is the model) and trainer.dtype / trainer.tf32
 * (declared with their own flags in commands/train.ts).
 */
export const SETTING_FLAGS: readonly SettingFlag[] = [
  { key: "data.path", flags: "-d, --data <tokens.bin>", description: "token file (u32 .bin or llm.c shard); default: the built-in corpus", aliases: ["--data-path"] },
  { key: "data.tokenizer", flags: "--tokenizer <name>", description: "tokenizer of the data (the built-in corpus is tokenized with it)" },
  { key: "data.val_fraction", flags: "--val-fraction <x>", description: "share of the tokens held out for validation" },
  { key: "trainer.learning_rate", flags: "--learning-rate <lr>", description: "peak learning rate", aliases: ["--lr"] },
  { key: "trainer.min_learning_rate", flags: "--min-learning-rate <lr>", description: "learning rate at the end of the schedule (default: a tenth of the peak)", aliases: ["--min-lr"] },
  { key: "trainer.lr_schedule", flags: "--lr-schedule <schedule>", description: "cosine, linear or constant after warmup" },
  { key: "trainer.warmup_steps", flags: "--warmup-steps <n>", description: "steps of linear warmup" },
  { key: "trainer.batch_size", flags: "--batch-size <n>", description: "micro-batch size", also: ["estimate"] },
  { key: "trainer.seq_len", flags: "--seq-len <n>", description: "tokens per sequence (<= model.max_seq_len)", also: ["estimate"] },
  { key: "trainer.gradient_accumulation", flags: "--grad-accum <n>", description: "micro-batches per optimizer step", aliases: ["--gradient-accumulation"], also: ["estimate"] },
  { key: "trainer.max_steps", flags: "--max-steps <n>", description: "optimizer steps to train for" },
  { key: "trainer.num_epochs", flags: "--num-epochs <x>", description: "passes over the data (when max_steps is not set)", aliases: ["--epochs"] },
  { key: "trainer.weight_decay", flags: "--weight-decay <x>", description: "AdamW weight decay" },
  { key: "trainer.beta1", flags: "--beta1 <x>", description: "AdamW beta1" },
  { key: "trainer.beta2", flags: "--beta2 <x>", description: "AdamW beta2" },
  { key: "trainer.eps", flags: "--eps <x>", description: "AdamW epsilon" },
  { key: "trainer.grad_clip", flags: "--grad-clip <x>", description: "clip gradients to this global norm (0: no clipping)" },
  { key: "trainer.recompute", flags: "--recompute <policy>", description: "recompute activations in backward: auto (default: none on a GPU where everything fits, else cheap), none, cheap (GELU/norms), blocks (checkpointing)", also: ["estimate"] },
  { key: "trainer.target_device", flags: "--target-device <device>", description: "where to train: auto (the GPU when usable), cpu or gpu" },
  { key: "trainer.cuda_graphs", flags: "--cuda-graphs", description: "GPU: record each micro-batch's forward and backward once as a CUDA graph and launch it whole (one host call instead of hundreds: for small models)" },
  { key: "trainer.on_nonfinite", flags: "--on-nonfinite <policy>", description: "a step whose loss or gradients are NaN or infinite: stop (default) or skip it" },
  { key: "trainer.sync_timeout", flags: "--sync-timeout <seconds>", description: "data parallel: how long a rank waits for the others before the run stops naming the missing rank" },
  { key: "trainer.bucket_mb", flags: "--bucket-mb <mib>", description: "data parallel: MiB of gradients per all-reduce bucket", aliases: ["--bucket-cap-mb"] },
  { key: "trainer.load_balance_alpha", flags: "--load-balance-alpha <x>", description: "mixture of experts: weight of the load-balancing loss (default 0.01)" },
  { key: "trainer.seed", flags: "--seed <n>", description: "seed for initialisation and data order" },
  { key: "trainer.prefetch", flags: "--prefetch <n>", description: "batches read ahead of compute" },
  { key: "trainer.log_interval", flags: "--log-interval <n>", description: "steps between log lines" },
  { key: "trainer.eval_interval", flags: "--eval-interval <n>", description: "steps between validation runs" },
  { key: "trainer.eval_iters", flags: "--eval-iters <n>", description: "batches per validation run" },
  { key: "trainer.save_best", flags: "--save-best", description: "keep the checkpoint with the lowest val_loss as best.safetensors" },
  { key: "trainer.early_stop", flags: "--early-stop <n>", description: "stop after N evaluations without a lower val_loss", aliases: ["--early-stopping-patience"] },
  { key: "trainer.save_interval", flags: "--save-interval <n>", description: "steps between checkpoints" },
  { key: "trainer.max_checkpoints", flags: "--max-checkpoints <n>", description: "keep only the newest N step checkpoints" },
  { key: "trainer.checkpoint_dir", flags: "--output-dir <dir>", description: "checkpoints and metrics.jsonl (default: checkpoints/<config name>)", aliases: ["--checkpoint-dir"] },
];

const SECTIONS = { model: modelSchema, trainer: trainerSchema, data: dataSchema } as const;

function schemaOf(key: SettingFlag["key"]): z.ZodType {
  const [section, name] = key.split(".") as [keyof typeof SECTIONS, string];
  const shape = SECTIONS[section].shape as Record<string, z.ZodType>;
  const schema = shape[name];
  if (!schema) throw new Error(`setting flag for ${key}, which the config schema does not have`);
  return schema;
}

/** What a key takes, in words, from its schema: "an integer > 0", "a number >= 0 and < 1", "one of cosine, linear, constant". */
export function expectationOf(schema: z.ZodType): string {
  const j = z.toJSONSchema(schema) as { type?: string; enum?: unknown[]; minimum?: number; exclusiveMinimum?: number; exclusiveMaximum?: number; maximum?: number };
  if (j.enum) return `one of ${j.enum.join(", ")}`;
  const bounds = [
    j.exclusiveMinimum !== undefined ? `> ${j.exclusiveMinimum}` : j.minimum !== undefined ? `>= ${j.minimum}` : undefined,
    j.exclusiveMaximum !== undefined ? `< ${j.exclusiveMaximum}` : j.maximum !== undefined && j.maximum < Number.MAX_SAFE_INTEGER ? `<= ${j.maximum}` : undefined,
  ].filter((b) => b !== undefined);
  const kind = j.type === "integer" ? "an integer" : j.type === "number" ? "a number" : j.type === "boolean" ? "true or false" : "a text";
  return bounds.length > 0 ? `${kind} ${bounds.join(" and ")}` : kind;
}

/** commander parser for `flag`: the text as the YAML key would take it, checked by the key's schema. */
export function settingParser(key: SettingFlag["key"]): (value: string) => unknown {
  const schema = schemaOf(key);
  return (text: string) => {
    // A string key (a path, an enum) takes the text as it is; otherwise it is read as a YAML scalar (3e-4, 10, true).
    const asText = schema.safeParse(text);
    if (asText.success) return asText.data;
    let scalar: unknown = text;
    try {
      scalar = parseYamlScalar(text);
    } catch {
      // Not a scalar: checked as text below.
    }
    const parsed = schema.safeParse(scalar);
    if (parsed.success && parsed.data !== undefined) return parsed.data;
    throw new InvalidArgumentError(`expected ${expectationOf(schema)} (as ${key} takes), got "${text}"`);
  };
}

function longFlag(spelling: string): string {
  return new Option(spelling).long ?? spelling;
}

/** Every spelling of a setting's flag: its own long flag, then its aliases. */
export function spellingsOf(s: SettingFlag): string[] {
  return [longFlag(s.flags), ...(s.aliases ?? [])];
}

/** The setting flags `command` takes. */
export function settingFlagsFor(command: SettingCommand): SettingFlag[] {
  return SETTING_FLAGS.filter((s) => command === "train" || s.also?.includes(command));
}

/** Adds `command`'s setting flags (aliases hidden from the help, named in the description) to `cmd`. */
export function addSettingFlags(cmd: Command, command: SettingCommand): Command {
  for (const s of settingFlagsFor(command)) {
    const parse = settingParser(s.key);
    const aliases = s.aliases ?? [];
    // A flag without a value name ("--tf32") is a switch: true when given.
    const at = s.flags.indexOf(" <");
    const valueName = at < 0 ? "" : s.flags.slice(at);
    const option = (spelling: string, description?: string) => {
      const o = new Option(spelling, description);
      return valueName ? o.argParser(parse) : o;
    };
    cmd.addOption(option(s.flags, `${s.description} (${s.key}${aliases.length ? `; also ${aliases.join(", ")}` : ""})`));
    for (const alias of aliases) cmd.addOption(option(`${alias}${valueName}`).hideHelp());
  }
  return cmd;
}

/** commander's property name for a flag spelling ("--grad-accum" -> "gradAccum"). */
function attributeOf(spelling: string): string {
  return new Option(spelling).attributeName();
}

/** Where a setting's value came from, for messages: the flag as typed. */
export type FlagSources = ReadonlyMap<string, string>;

/**
 * The config with the setting flags in `flags` (commander's parsed options) written over
 * it, and which keys a flag set (key -> the flag spelling used).
 */
export function applySettingFlags(config: KilnConfig, flags: Readonly<Record<string, unknown>>): { config: KilnConfig; fromFlags: FlagSources } {
  const sections: Record<string, Record<string, unknown>> = { ...(config.model ? { model: { ...config.model } } : {}), trainer: { ...config.trainer }, data: { ...config.data } };
  const fromFlags = new Map<string, string>();
  for (const s of SETTING_FLAGS) {
    const used = spellingsOf(s).find((spelling) => flags[attributeOf(spelling)] !== undefined);
    if (used === undefined) continue;
    const [section, name] = s.key.split(".") as [string, string];
    sections[section][name] = flags[attributeOf(used)];
    fromFlags.set(s.key, used);
  }
  return { config: sections as unknown as KilnConfig, fromFlags };
}
