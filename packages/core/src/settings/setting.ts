import { z } from "zod";

/** The sections of a kiln YAML config. */
export const SETTING_SECTIONS = ["model", "trainer", "data"] as const;
export type SettingSection = (typeof SETTING_SECTIONS)[number];

/** The commands whose flags can set a config key (every flag setting is train's). */
export const SETTING_COMMANDS = ["train", "estimate"] as const;
export type SettingCommand = (typeof SETTING_COMMANDS)[number];

/** `section.key` as a config file spells it. */
export type SettingKey = `${SettingSection}.${string}`;

/** What a setting is, besides its value's schema: how a user reaches it and what it means. */
export interface SettingMeta {
  /** What it does, for `--help` and the docs' table. */
  help: string;
  /** commander's spelling of its flag with the value's name ("--batch-size <n>"), or a switch ("--save-best"); absent: YAML only. */
  flag?: string;
  /** Other spellings of the flag kiln answers to ("--lr"), hidden from the help. */
  aliases?: readonly string[];
  /**
   * Names other trainers give the setting (Hugging Face's, nanoGPT's, Oxidizr's), with
   * underscores: a YAML key with one of them is answered with this key, and on a setting
   * with a flag each is a hidden flag too (`--max_length`, `--max-length`).
   */
  otherNames?: readonly string[];
  /** Switches that give the setting a value: `{ "--bf16": "bf16" }`. */
  switches?: Readonly<Record<string, string>>;
  /** Commands besides train whose flags set it. */
  also?: readonly SettingCommand[];
  /** Whether the web page's runs read it (the model section always); the page names the others it leaves aside. */
  page?: boolean;
}

/** One setting: its value's schema (type, default, range or enum) and where it leads in kiln's resolved settings. */
export interface Setting<S extends z.ZodType = z.ZodType, F extends string = string> extends SettingMeta {
  /** The name the resolved settings give it (ModelConfig's field for a model key, RunSettings' for the others). */
  field: F;
  schema: S;
  /** Model keys whose 0 (or empty list) means "not set": the field is left out of the ModelConfig then. */
  zeroIsUnset?: boolean;
}

/** A setting declaration (the key is the property it sits under in its section's table). */
export function setting<F extends string, S extends z.ZodType>(field: F, schema: S, meta: SettingMeta & { zeroIsUnset?: boolean }): Setting<S, F> {
  return { field, schema, ...meta };
}

/** A section's settings by key. */
export type SectionTable = Readonly<Record<string, Setting>>;

/** The values a section's settings resolve to, by field name (defaults applied). */
export type SectionValues<T extends SectionTable> = { -readonly [K in keyof T as T[K]["field"]]: z.output<T[K]["schema"]> };

/** The zod object schema of a section's keys (unknown keys refused). */
export function sectionSchema<T extends SectionTable>(table: T) {
  const shape = Object.fromEntries(Object.entries(table).map(([key, s]) => [key, s.schema])) as { [K in keyof T]: T[K]["schema"] };
  return z.object(shape).strict();
}

/** Schemas the tables share. */
export const positiveInt = z.number().int().positive();
export const nonNegativeInt = z.number().int().nonnegative();

/** What a schema takes, in words: "an integer > 0", "a number >= 0 and < 1", "one of cosine, linear, constant". */
export function expectationOf(schema: z.ZodType): string {
  const j = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as {
    type?: string;
    enum?: unknown[];
    minimum?: number;
    exclusiveMinimum?: number;
    exclusiveMaximum?: number;
    maximum?: number;
    items?: { type?: string; minimum?: number };
  };
  if (j.enum) return `one of ${j.enum.join(", ")}`;
  if (j.type === "array") return `a list of ${j.items?.type === "integer" ? `integers${j.items.minimum === 0 ? " >= 0" : ""}` : "values"}`;
  const bounds = [
    j.exclusiveMinimum !== undefined ? `> ${j.exclusiveMinimum}` : j.minimum !== undefined ? `>= ${j.minimum}` : undefined,
    j.exclusiveMaximum !== undefined ? `< ${j.exclusiveMaximum}` : j.maximum !== undefined && j.maximum < Number.MAX_SAFE_INTEGER ? `<= ${j.maximum}` : undefined,
  ].filter((b) => b !== undefined);
  const kind = j.type === "integer" ? "an integer" : j.type === "number" ? "a number" : j.type === "boolean" ? "true or false" : "a text";
  return bounds.length > 0 ? `${kind} ${bounds.join(" and ")}` : kind;
}

/** A schema's default, or undefined when it has none. */
export function defaultOf(schema: z.ZodType): unknown {
  const parsed = schema.safeParse(undefined);
  return parsed.success ? parsed.data : undefined;
}
