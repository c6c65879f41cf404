import { ConfigError } from "@kiln/contract";
import type { ModelConfig } from "../model/config.js";
import { CONFIG_LAYOUT, type ParsedConfig } from "./config-text.js";
import { type InitModel, checkModelAgrees, modelOfSection } from "./model-section.js";
import { withLoraSettings } from "./lora-settings.js";
import type { SectionValues } from "./setting.js";
import { type KilnConfig, SETTINGS } from "./settings-table.js";

/**
 * Values set from outside the file (a command's flags), by key, with the spelling that set
 * each (`--seq-len`) and how it was typed (`--seq-len 32`, `--bf16`), for messages.
 */
export type SettingOverrides = ReadonlyMap<string, { value: unknown; from: string; typed?: string }>;

type TableValues = SectionValues<typeof SETTINGS.trainer> & SectionValues<typeof SETTINGS.data>;

/** Everything a training run needs, resolved from the file, the overrides and the defaults: each setting under its field name. */
export interface RunSettings extends Omit<TableValues, "seqLen" | "minLr" | "checkpointDir"> {
  /** Where the config came from, for messages. */
  configPath: string;
  /** The config's text, stored in checkpoints. */
  configText: string;
  model: ModelConfig;
  /** Tokens per sequence: trainer.seq_len, else model.max_seq_len. */
  seqLen: number;
  /** trainer.min_learning_rate, else a tenth of the peak. */
  minLr: number;
  /** Where checkpoints and metrics go: trainer.checkpoint_dir, else checkpoints/<config name>. */
  outputDir: string;
  /** Oxidizr settings the config carries that kiln ignores (named in a warning). */
  ignoredKeys: readonly string[];
  /** The keys set from outside the file, with the spelling used (`--seq-len`) and as typed (`--seq-len 32`). */
  overridden: ReadonlyMap<string, { from: string; typed: string }>;
  /** The keys the file itself sets ("trainer.max_steps"), and the line of each. */
  givenKeys: readonly string[];
  keyLines: Readonly<Record<string, number>>;
  /** The file's step limits a flag set aside ("trainer.max_steps 2400" when --num-epochs was given). */
  limitsSetAside: readonly string[];
}

/** The keys that end a run: with both set, whichever comes first. */
export const STEP_LIMIT_KEYS = ["trainer.max_steps", "trainer.num_epochs"] as const;

/** What set a key, for messages: the flag as typed (`--dtype bf16`), `trainer.dtype in run.yaml`, or `the default`. */
export function settingSource(s: Pick<RunSettings, "overridden" | "givenKeys" | "configPath">, key: string): string {
  const flag = s.overridden.get(key);
  if (flag) return flag.typed;
  return s.givenKeys.includes(key) ? `${key} in ${s.configPath}` : `the default of ${key}`;
}

/**
 * Where a key's value came from, as an error's `where`: the flag (`--target-device`), the
 * file and line (`run.yaml:14`), or undefined for a default.
 */
export function settingWhere(s: Pick<RunSettings, "overridden" | "keyLines" | "configPath">, key: string): string | undefined {
  const flag = s.overridden.get(key);
  if (flag) return flag.from;
  const line = s.keyLines[key];
  return line === undefined ? undefined : `${s.configPath}:${line}`;
}

/**
 * A step limit on the command line sets aside the file's: `--num-epochs 1` beside the
 * file's `max_steps: 2400` trains one epoch. Removes those from `config`; returns them.
 */
function setAsideFileLimits(config: KilnConfig, overrides: SettingOverrides): string[] {
  if (!STEP_LIMIT_KEYS.some((k) => overrides.has(k))) return [];
  const trainer = config.trainer as Record<string, unknown>;
  const setAside: string[] = [];
  for (const key of STEP_LIMIT_KEYS) {
    const name = key.split(".")[1];
    if (overrides.has(key) || trainer[name] === undefined) continue;
    setAside.push(`${key} ${String(trainer[name])}`);
    delete trainer[name];
  }
  return setAside;
}

/** The config with `overrides` written over the file's values. */
export function applyOverrides(config: KilnConfig, overrides: SettingOverrides): KilnConfig {
  const sections: Record<string, Record<string, unknown>> = { ...(config.model ? { model: { ...config.model } } : {}), trainer: { ...config.trainer }, data: { ...config.data } };
  for (const [key, { value }] of overrides) {
    const [section, name] = key.split(".") as [string, string];
    sections[section] ??= {};
    sections[section][name] = value;
  }
  return sections as unknown as KilnConfig;
}

/** A config file's name without folder and extension (a run's default output folder is named after it). */
function configName(file: string): string {
  return (file.split(/[\\/]/).pop() ?? file).replace(/\.ya?ml$/i, "");
}

/**
 * Resolves a run's settings: `overrides` (a command's flags) over the file, the table's
 * defaults, then the checks no single key can make (lengths, an end to training). With
 * `init` (--init-from) the model is the one the weights come with, and the file's model
 * section, when there is one, must agree with it. `needsLength: false` (a plan, not a run)
 * accepts a config that sets no end to training.
 */
export function resolveSettings(parsed: ParsedConfig, overrides: SettingOverrides = new Map(), init?: InitModel, options: { needsLength?: boolean } = {}): RunSettings {
  const config = applyOverrides(parsed.config, overrides);
  const limitsSetAside = setAsideFileLimits(config, overrides);
  const file = parsed.path;
  const whereOf = (key: string) => `${file} (${overrides.get(key)?.from ?? key})`;
  if (init && config.model) checkModelAgrees(config.model, init, file);
  if (!init && !config.model) {
    throw new ConfigError("the config has no model section", { where: `${file} (model)`, hint: `add a model: section (${CONFIG_LAYOUT}), or start from trained weights with --init-from` });
  }
  const values = {} as Record<string, unknown>;
  for (const section of ["trainer", "data"] as const) {
    const given = config[section] as Record<string, unknown>;
    for (const [key, s] of Object.entries(SETTINGS[section])) values[s.field] = given[key];
  }
  const t = values as unknown as TableValues;
  const model = withLoraSettings(init?.model ?? modelOfSection(config.model!, file), t, whereOf);
  const seqLen = t.seqLen ?? model.maxSeqLen;
  if (seqLen > model.maxSeqLen) {
    throw new ConfigError(`seq_len ${seqLen} is longer than model.max_seq_len ${model.maxSeqLen}`, { where: whereOf("trainer.seq_len"), hint: `use --seq-len ${model.maxSeqLen} or less, or raise model.max_seq_len` });
  }
  if (t.maxSteps === undefined && t.numEpochs === undefined && options.needsLength !== false) {
    throw new ConfigError("neither trainer.max_steps nor trainer.num_epochs is set, so training would never end", {
      where: `${file} (trainer.max_steps)`,
      hint: "set trainer.max_steps (or pass --max-steps), or trainer.num_epochs",
    });
  }
  const { checkpointDir, ...rest } = t;
  return {
    ...rest,
    configPath: file,
    configText: parsed.text,
    model,
    seqLen,
    minLr: t.minLr ?? t.lr / 10,
    outputDir: checkpointDir ?? `checkpoints/${configName(file)}`,
    ignoredKeys: parsed.ignoredKeys,
    overridden: new Map([...overrides].map(([key, o]) => [key, { from: o.from, typed: o.typed ?? o.from }])),
    givenKeys: parsed.givenKeys,
    keyLines: parsed.keyLines,
    limitsSetAside,
  };
}
