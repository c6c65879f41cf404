import fs from "node:fs";
import { ConfigError } from "@kiln/contract";
import { type ParsedConfig, parseConfigText } from "@kiln/core";

/** A YAML config file checked against core's settings table. */
export type LoadedConfig = ParsedConfig;

/** Reads and validates a config file. Every problem becomes a ConfigError naming the file, line and key. */
export function loadConfigFile(path: string): LoadedConfig {
  let text: string;
  try {
    text = fs.readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(code === "ENOENT" ? "the config file does not exist" : `cannot read the config file (${code ?? String(err)})`, {
      where: path,
      hint: code === "ENOENT" ? "check the path given to -f (relative to the folder kiln runs in); kiln's repository has ready configs in its models/ folder" : "check the file's permissions",
    });
  }
  return parseConfigText(text, path);
}

/**
 * The config of a run whose model comes from --init-from alone: no model section, the
 * trainer's defaults and the flags, the run named after the weights' folder or file.
 * Without --init-from either, `command` needs -f.
 */
export function weightsOnlyConfig(initFrom: string | undefined, command: string): LoadedConfig {
  if (initFrom === undefined) {
    throw new ConfigError(`kiln ${command} needs a config file`, {
      where: "-f",
      hint: "pass -f config.yaml (kiln's repository has ready ones in its models/ folder), or --init-from PATH to take the model from trained weights with default trainer settings",
    });
  }
  return { ...parseConfigText("{}", initFrom), text: "" };
}
