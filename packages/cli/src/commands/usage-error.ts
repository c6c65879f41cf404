import type { Command, CommanderError } from "commander";
import { ConfigError } from "@kiln/contract";
import { didYouMean, kilnKeyFor, settingOf } from "@kiln/core";
import { spellingsOf } from "../config/setting-flags.js";

/** commander's codes for help and version output: not errors. */
const NOT_ERRORS = new Set(["commander.helpDisplayed", "commander.help", "commander.version"]);

/** "kiln train" for the train command, "kiln" for the program. */
function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** Every long flag `cmd` takes, hidden aliases included. */
function longFlags(cmd: Command): string[] {
  return cmd.options.map((o) => o.long).filter((l): l is string => l !== undefined);
}

/** What to say about a flag `cmd` does not have: kiln's name for another trainer's setting, else the nearest flag. */
function unknownFlagAdvice(cmd: Command, flag: string): string | undefined {
  const name = flag.split("=")[0];
  const key = kilnKeyFor(name);
  if (key !== undefined) {
    const setting = settingOf(key)!;
    const taken = setting.flag !== undefined && longFlags(cmd).includes(spellingsOf(setting)[0]);
    return taken ? `kiln calls it ${spellingsOf(setting)[0]} (${key})` : `kiln sets it in the config file as ${key}`;
  }
  // The flags --help shows first; then their hidden spellings (--device for --target-device).
  const shown = cmd.options.filter((o) => !o.hidden && o.long !== undefined).map((o) => o.long!);
  const near = didYouMean(name, shown) ?? didYouMean(name, longFlags(cmd));
  return near ? `did you mean ${near}?` : undefined;
}

/** The first quoted part of a commander message: error: unknown option '--x' -> --x. */
function quoted(message: string): string | undefined {
  return /'([^']*)'/.exec(message)?.[1];
}

/**
 * A commander parse error of `cmd` as one kiln error: what was wrong and with which flag,
 * a did-you-mean where there is one, and where the help is (instead of the whole help text).
 */
export function usageError(cmd: Command, err: CommanderError): ConfigError | CommanderError {
  if (NOT_ERRORS.has(err.code)) return err;
  const path = commandPath(cmd);
  const help = `see ${path} --help`;
  const what = err.message.replace(/^error: /, "").replace(/\s*\(Did you mean [^)]*\)\s*$/s, "").trim();
  switch (err.code) {
    case "commander.unknownOption": {
      const flag = quoted(err.message) ?? "";
      const advice = unknownFlagAdvice(cmd, flag);
      return new ConfigError(`${path} has no option ${flag.split("=")[0]}`, { where: flag.split("=")[0], hint: advice ? `${advice} (${help})` : help });
    }
    case "commander.missingMandatoryOptionValue": {
      // Most often the config given without -f: `kiln train models/nano.yaml`.
      const yaml = cmd.args.find((a) => /\.ya?ml$/i.test(a));
      if (yaml) return new ConfigError(`${path} needs the config file after -f`, { where: yaml, hint: `${path} -f ${yaml} (${help})` });
    }
    // falls through
    case "commander.invalidArgument":
    case "commander.optionMissingArgument": {
      // "option '--batch-size <n>' argument 'x' is invalid. expected ...": name the flag, keep the reason.
      const spec = quoted(what) ?? "";
      const flag = spec.split(/[ ,]+/).find((p) => p.startsWith("--")) ?? spec;
      return new ConfigError(what.replace(/^option '[^']*' argument '[^']*' is invalid\. /, ""), { where: flag, hint: help });
    }
    case "commander.unknownCommand": {
      const name = quoted(err.message) ?? "";
      const near = didYouMean(name, cmd.commands.map((c) => c.name()));
      return new ConfigError(`kiln has no command ${name}`, { where: path, hint: near ? `did you mean ${path} ${near}? (${help})` : help });
    }
    case "commander.excessArguments": {
      const yaml = cmd.args.find((a) => /\.ya?ml$/i.test(a));
      if (yaml && cmd.args.length === 1) return new ConfigError(`${path} needs the config file after -f`, { where: yaml, hint: `${path} -f ${yaml} (${help})` });
      return new ConfigError(`${path} takes no arguments besides its flags (got ${cmd.args.join(" ")})`, {
        where: path,
        hint: yaml ? `name the config with -f: ${path} -f ${yaml} (${help})` : help,
      });
    }
    default:
      return new ConfigError(what, { where: path, hint: help });
  }
}

/**
 * Makes `cmd` and its subcommands report parse errors through usageError (thrown, so
 * main() prints them like every other kiln error) and print nothing themselves.
 */
export function reportUsageErrors(cmd: Command): void {
  cmd.configureOutput({ outputError: () => {} });
  cmd.exitOverride((err) => {
    throw usageError(cmd, err);
  });
  for (const sub of cmd.commands) reportUsageErrors(sub);
}
