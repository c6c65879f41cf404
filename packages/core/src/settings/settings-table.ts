import { z } from "zod";
import type { ModelConfig } from "../model/config.js";
import { MODEL_SETTINGS } from "./model-settings.js";
import { type Setting, type SettingCommand, type SettingKey, type SettingSection, sectionSchema } from "./setting.js";
import { DATA_SETTINGS, TRAINER_SETTINGS } from "./trainer-settings.js";

/** Every setting of a kiln config, by section and key: the one place a setting is declared. */
export const SETTINGS = { model: MODEL_SETTINGS, trainer: TRAINER_SETTINGS, data: DATA_SETTINGS } as const;

export const modelSchema = sectionSchema(MODEL_SETTINGS);
export const trainerSchema = sectionSchema(TRAINER_SETTINGS);
export const dataSchema = sectionSchema(DATA_SETTINGS);

/** A whole config file. The model section is optional only with --init-from, whose model it must then agree with. */
export const configSchema = z
  .object({
    model: modelSchema.optional(),
    trainer: trainerSchema.default(trainerSchema.parse({})),
    data: dataSchema.default(dataSchema.parse({})),
  })
  .strict();

export type KilnConfig = z.infer<typeof configSchema>;
export type ModelSection = z.infer<typeof modelSchema>;
export type TrainerSection = z.infer<typeof trainerSchema>;
export type DataSection = z.infer<typeof dataSchema>;

/** A setting with its key. */
export type KeyedSetting = Setting & { key: SettingKey; section: SettingSection; name: string };

/** Every setting, in table order. */
export const ALL_SETTINGS: readonly KeyedSetting[] = Object.entries(SETTINGS).flatMap(([section, table]) =>
  Object.entries(table as Record<string, Setting>).map(([name, s]) => ({ ...s, key: `${section}.${name}` as SettingKey, section: section as SettingSection, name })),
);

/** The setting of `key` ("trainer.batch_size"), or undefined. */
export function settingOf(key: string): KeyedSetting | undefined {
  return ALL_SETTINGS.find((s) => s.key === key);
}

/** Every key each section accepts ("" is the top level), for did-you-mean. */
export const KNOWN_KEYS: Readonly<Record<string, readonly string[]>> = {
  "": Object.keys(configSchema.shape),
  ...Object.fromEntries(Object.entries(SETTINGS).map(([section, table]) => [section, Object.keys(table)])),
};

/** The ModelConfig field each key of a YAML config's model section sets. */
export const MODEL_YAML_KEYS = Object.fromEntries(Object.entries(MODEL_SETTINGS).map(([key, s]) => [key, s.field])) as { [K in keyof typeof MODEL_SETTINGS]: (typeof MODEL_SETTINGS)[K]["field"] };

/** The YAML model key that sets a ModelConfig field. */
export function yamlKeyOf(field: keyof ModelConfig): string {
  return Object.entries(MODEL_YAML_KEYS).find(([, f]) => f === field)?.[0] ?? field;
}

/** The settings whose flag `command` takes. */
export function flagSettingsFor(command: SettingCommand): KeyedSetting[] {
  return ALL_SETTINGS.filter((s) => s.flag !== undefined && (command === "train" || s.also?.includes(command)));
}

/** Trainer and data settings the web page leaves aside. */
export const NOT_ON_PAGE: readonly SettingKey[] = ALL_SETTINGS.filter((s) => s.section !== "model" && !s.page).map((s) => s.key);

/**
 * kiln's key for a name another trainer uses (Hugging Face Trainer, nanoGPT, GPT-2 configs),
 * written with dashes or underscores: `eval_steps` is trainer.eval_interval.
 */
export function kilnKeyFor(name: string): SettingKey | undefined {
  const asKey = (spelling: string) => spelling.replace(/^-+/, "").replace(/-/g, "_").toLowerCase();
  const n = asKey(name);
  return ALL_SETTINGS.find((s) => s.otherNames?.includes(n) || s.aliases?.some((a) => asKey(a) === n))?.key;
}
