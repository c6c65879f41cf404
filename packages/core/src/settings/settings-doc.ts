import { type KeyedSetting, ALL_SETTINGS } from "./settings-table.js";
import { defaultOf, expectationOf } from "./setting.js";

/** How a setting is reached from the command line, for the docs: its flag, aliases and switches. */
function flagsOf(s: KeyedSetting): string {
  if (!s.flag) return "";
  const flags = [s.flag.replace(/^-\w, /, "").split(" ")[0], ...(s.flag.match(/^-\w(?=,)/) ?? []), ...(s.aliases ?? []), ...Object.keys(s.switches ?? {})];
  const commands = ["train", ...(s.also ?? [])].join(", ");
  return `${flags.map((f) => `\`${f}\``).join(", ")} (${commands})`;
}

function defaultText(s: KeyedSetting): string {
  if (!s.schema.safeParse(undefined).success) return "required";
  const d = defaultOf(s.schema);
  return d === undefined ? "" : `\`${JSON.stringify(d)}\``;
}

const cell = (text: string) => text.replace(/\|/g, "\\|");

/** The docs' table of every setting, one Markdown table per section, from the settings table. */
export function settingsMarkdown(): string {
  const out = [
    "# Settings",
    "",
    "Every key a kiln YAML config takes, by section, with what it takes, its default and the flags that set it.",
    "A flag given on the command line wins over the file. Flags also answer with underscores (`--batch_size`)",
    "and to the names other trainers use (in the last column); a YAML key with such a name is answered with kiln's key.",
    "This page is written from the settings table in `packages/core/src/settings/` by `node tooling/write-settings-doc.mjs`.",
    "",
  ];
  for (const section of ["model", "trainer", "data"] as const) {
    out.push(`## ${section}:`, "", "| key | takes | default | flags | what it does | other names |", "| --- | --- | --- | --- | --- | --- |");
    for (const s of ALL_SETTINGS.filter((x) => x.section === section)) {
      const page = section !== "model" && !s.page ? " Not read by the web page." : "";
      out.push(`| \`${s.name}\` | ${cell(expectationOf(s.schema))} | ${cell(defaultText(s))} | ${cell(flagsOf(s))} | ${cell(s.help)}.${page} | ${(s.otherNames ?? []).map((n) => `\`${n}\``).join(", ")} |`);
    }
    out.push("");
  }
  return out.join("\n");
}
