import { ConfigError } from "@kiln/contract";
import { LineCounter, type Document, isNode, parseDocument } from "yaml";
import type { z } from "zod";
import { didYouMean } from "./did-you-mean.js";
import { takeOxidizrKeys } from "./oxidizr-keys.js";
import { KNOWN_KEYS, type KilnConfig, configSchema, kilnKeyFor } from "./settings-table.js";

/** A config's text checked against the settings table. */
export interface ParsedConfig {
  /** Where the text came from (a file's path as the user gave it), for messages. */
  path: string;
  config: KilnConfig;
  /** The text, stored in checkpoints so a run can be reproduced. */
  text: string;
  /** Oxidizr settings kiln left aside ("trainer.group_size"), for one warning. */
  ignoredKeys: string[];
  /** The keys the text itself sets ("trainer.max_steps"), before defaults fill the rest. */
  givenKeys: string[];
  /** The line of each of givenKeys. */
  keyLines: Readonly<Record<string, number>>;
}

/**
 * What a config looks like, for hints: a path such as models/nano-start.yaml would mean
 * nothing outside kiln's repository, so the layout is given in the message itself.
 */
export const CONFIG_LAYOUT =
  "a config is two mappings, e.g. model: { arch: gpt2, vocab_size: 256, hidden_size: 128, num_layers: 4, num_heads: 4, max_seq_len: 128 } and trainer: { max_steps: 2400 } (every key: kiln's docs/settings.md)";

/** Parses and validates a config's YAML text. Every problem becomes a ConfigError naming `path`, the line and the key. */
export function parseConfigText(text: string, path: string): ParsedConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const at = lines.linePos(e.pos[0]);
    throw new ConfigError(`YAML syntax error: ${e.message.split("\n")[0]}`, { where: `${path}:${at.line}`, hint: "fix the YAML syntax at that line" });
  }
  const raw = doc.toJS() as unknown;
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new ConfigError("the config must be a mapping with model: and trainer: sections", { where: path, hint: CONFIG_LAYOUT });
  }
  const ignoredKeys = takeOxidizrKeys(raw as Record<string, unknown>);
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw issuesToError(parsed.error.issues, doc, lines, path);
  const givenKeys = Object.entries(raw).flatMap(([section, keys]) => (keys && typeof keys === "object" ? Object.keys(keys).map((k) => `${section}.${k}`) : []));
  const keyLines = Object.fromEntries(givenKeys.map((k) => [k, lineOf(doc, lines, k.split("."))!]));
  return { path, config: parsed.data, text, ignoredKeys, givenKeys, keyLines };
}

/** Line of the YAML node at `keyPath`, or of its parent when the key is absent. */
function lineOf(doc: Document, lines: LineCounter, keyPath: readonly PropertyKey[]): number | undefined {
  for (let n = keyPath.length; n >= 0; n--) {
    const node = doc.getIn(keyPath.slice(0, n) as (string | number)[], true);
    if (isNode(node) && node.range) return lines.linePos(node.range[0]).line;
  }
  return undefined;
}

/** `section.key` when `key` belongs to a section other than `section`. */
function sectionOf(key: string, section: string): string | undefined {
  const owner = Object.keys(KNOWN_KEYS).find((s) => s !== "" && s !== section && KNOWN_KEYS[s].includes(key));
  return owner === undefined ? undefined : `${owner}.${key}`;
}

function describeValue(v: unknown): string {
  return typeof v === "string" ? `"${v}"` : JSON.stringify(v);
}

function issuesToError(issues: readonly z.core.$ZodIssue[], doc: Document, lines: LineCounter, path: string): ConfigError {
  const messages: string[] = [];
  let firstLine: number | undefined;
  let hint = "fix the value (every key, its type and range: kiln's docs/settings.md, or kiln train --help)";
  for (const issue of issues) {
    const keyPath = issue.path.map(String);
    const section = keyPath.join(".");
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const full = section ? `${section}.${key}` : key;
        const line = lineOf(doc, lines, [...keyPath, key]);
        firstLine ??= line;
        // A name from another trainer (eval_steps), or a kiln key in the wrong section: say where kiln has it.
        const target = kilnKeyFor(key) ?? sectionOf(key, section);
        if (target !== undefined && target !== full) {
          const [targetSection, targetKey] = target.split(".");
          messages.push(`unknown key ${full}${line ? ` (line ${line})` : ""}; kiln calls it ${target}`);
          hint = targetSection === section ? `rename ${full} to ${target}` : `move it to the ${targetSection}: section as ${targetKey}`;
          continue;
        }
        const suggestion = didYouMean(key, KNOWN_KEYS[section] ?? []);
        messages.push(`unknown key ${full}${line ? ` (line ${line})` : ""}${suggestion ? `; did you mean ${section ? `${section}.` : ""}${suggestion}?` : ""}`);
        if (suggestion) hint = `rename ${full} to ${section ? `${section}.` : ""}${suggestion}`;
        else hint = `remove ${full}; ${section || "the top level"} accepts ${(KNOWN_KEYS[section] ?? []).join(", ")}`;
      }
      continue;
    }
    const line = lineOf(doc, lines, keyPath);
    firstLine ??= line;
    const value = doc.getIn(keyPath as string[]);
    const where = `${section}${line ? ` (line ${line})` : ""}`;
    if (issue.code === "invalid_type") {
      messages.push(value === undefined ? `${where} is required` : `${where} must be ${issue.expected === "int" ? "an integer" : `a ${issue.expected}`}, got ${describeValue(value)}`);
    } else if (issue.code === "too_small" || issue.code === "too_big") {
      messages.push(`${where} is ${describeValue(value)}: ${issue.message.replace(/^Too (small|big): expected number to be /, "must be ")}`);
    } else if (issue.code === "invalid_value") {
      messages.push(`${where} is ${describeValue(value)}, expected one of ${issue.values.map((v) => describeValue(v)).join(", ")}`);
    } else {
      messages.push(`${where}: ${issue.message}${value === undefined ? "" : ` (got ${describeValue(value)})`}`);
    }
  }
  return new ConfigError(messages.join("\n  "), { where: firstLine ? `${path}:${firstLine}` : path, hint });
}
