import { type Command, InvalidArgumentError, Option } from "commander";
import { parse as parseYamlScalar } from "yaml";
import { ConfigError } from "@kiln/contract";
import { type KeyedSetting, type SettingCommand, type SettingOverrides, expectationOf, flagSettingsFor, settingOf } from "@kiln/core";

/**
 * The flags of core's settings table (`packages/core/src/settings/`) on commander commands:
 * each flag's value is parsed and checked by its key's own schema, so a flag accepts exactly
 * what the YAML key accepts, and every command that takes a flag gives it the same meaning.
 */

/** commander parser for the flag of `key`: the text as the YAML key would take it, checked by the key's schema. */
export function settingParser(key: string): (value: string) => unknown {
  const s = settingOf(key);
  if (!s) throw new Error(`a setting flag for ${key}, which the settings table does not have`);
  return (text: string) => {
    // A string key (a path, an enum) takes the text as it is; otherwise it is read as a YAML scalar (3e-4, 10, true).
    const asText = s.schema.safeParse(text);
    if (asText.success && asText.data !== undefined) return asText.data;
    let scalar: unknown = text;
    try {
      scalar = parseYamlScalar(text);
    } catch {
      // Not a scalar: checked as text below.
    }
    const parsed = s.schema.safeParse(scalar);
    if (parsed.success && parsed.data !== undefined) return parsed.data;
    throw new InvalidArgumentError(`expected ${expectationOf(s.schema)} (as ${key} takes), got "${text}"`);
  };
}

function longFlag(spelling: string): string {
  return new Option(spelling).long ?? spelling;
}

const dashed = (name: string) => `--${name.replace(/_/g, "-")}`;
const underscored = (flag: string) => flag.replace(/(?<=^--.*)-/g, "_");

/**
 * Every spelling of a setting's value flag: its own long flag, its aliases, the names other
 * trainers give it, and each of those with underscores (`--batch_size`); its switches not included.
 */
export function spellingsOf(s: KeyedSetting): string[] {
  if (!s.flag) return [];
  const own = [longFlag(s.flag), ...(s.aliases ?? []), ...(s.otherNames ?? []).map(dashed)];
  return [...new Set([...own, ...own.map(underscored)])];
}

/** Adds `command`'s setting flags to `cmd`: the flag with its help, aliases and other names hidden (the help names the aliases). */
export function addSettingFlags(cmd: Command, command: SettingCommand, parsers: Readonly<Record<string, (text: string) => unknown>> = {}): Command {
  for (const s of flagSettingsFor(command)) {
    const parse = parsers[s.key] ?? settingParser(s.key);
    // A flag without a value name ("--save-best") is a switch: true when given.
    const at = s.flag!.indexOf(" <");
    const valueName = at < 0 ? "" : s.flag!.slice(at);
    const option = (spelling: string, description?: string) => {
      const o = new Option(spelling, description);
      return valueName ? o.argParser(parse) : o;
    };
    const aliases = s.aliases ?? [];
    cmd.addOption(option(s.flag!, `${s.help} (${s.key}${aliases.length ? `; also ${aliases.join(", ")}` : ""})`));
    for (const spelling of spellingsOf(s).slice(1)) cmd.addOption(option(`${spelling}${valueName}`).hideHelp());
    for (const [flag, value] of Object.entries(s.switches ?? {})) cmd.addOption(new Option(flag, `same as ${longFlag(s.flag!)} ${value}`));
  }
  return cmd;
}

/** commander's property name for a flag spelling ("--grad-accum" -> "gradAccum"). */
function attributeOf(spelling: string): string {
  return new Option(spelling).attributeName();
}

/**
 * The settings `flags` (commander's parsed options of `command`) set, by key, each with the
 * spelling used. Two spellings of one setting that ask for different values are refused.
 */
export function settingOverrides(command: SettingCommand, flags: Readonly<Record<string, unknown>>): Map<string, { value: unknown; from: string; typed: string }> {
  const overrides = new Map<string, { value: unknown; from: string; typed: string }>();
  for (const s of flagSettingsFor(command)) {
    const given = [
      ...spellingsOf(s)
        .filter((spelling) => flags[attributeOf(spelling)] !== undefined)
        .map((spelling) => {
          const value = flags[attributeOf(spelling)];
          return { value, from: spelling, typed: typeof value === "boolean" ? spelling : `${spelling} ${String(value)}` };
        }),
      ...Object.entries(s.switches ?? {})
        .filter(([flag]) => flags[attributeOf(flag)] === true)
        .map(([flag, value]) => ({ value, from: flag, typed: flag })),
    ];
    if (given.length === 0) continue;
    const differing = given.find((g) => g.value !== given[0].value);
    if (differing) {
      throw new ConfigError(`${given[0].typed} and ${differing.typed} set ${s.key} to different values`, { where: differing.from, hint: `pass one of them (${s.key} takes ${expectationOf(s.schema)})` });
    }
    overrides.set(s.key, given[0]);
  }
  return overrides;
}

export type { SettingOverrides };
