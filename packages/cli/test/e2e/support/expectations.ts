import { expect } from "vitest";
import type { KilnResult } from "./kiln-process.js";
import type { TreeEntry } from "./workspace.js";

export interface Refusal {
  /** The KilnError class name, e.g. "ConfigError". */
  kind: string;
  /** The `where` part: exactly this text (a file, `file:line`, `file (key)`, a flag), or a pattern. */
  where: string | RegExp;
  /** What went wrong (matched against the text after `where:`). */
  message: RegExp;
  /** What to do (matched against the text after `what to do:`). */
  hint: RegExp;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The process refused: exit 1, one `kiln: <Kind> in <where>: <message>` block with a hint, nothing on stdout. */
export function expectRefused(r: KilnResult, want: Refusal): void {
  const context = `stderr:\n${r.stderr}`;
  expect(r.signal, context).toBeNull();
  expect(r.code, context).toBe(1);
  expect(r.stderr, context).not.toMatch(/internal error/);
  const head = new RegExp(`^kiln: ${escape(want.kind)} in ${typeof want.where === "string" ? escape(want.where) : want.where.source}: `, "m");
  expect(r.stderr, context).toMatch(head);
  const body = r.stderr.slice(r.stderr.search(head)).replace(head, "");
  const [message, hint] = body.split(/\n\s*what to do: /);
  expect(message, context).toMatch(want.message);
  expect(hint, `no "what to do" line\n${context}`).toBeDefined();
  expect(hint, context).toMatch(want.hint);
  expect(r.stdout).toBe("");
}

/** Paths added, removed or changed (content, size or modification time) between two snapshots. */
export function treeChanges(before: Map<string, TreeEntry>, after: Map<string, TreeEntry>): string[] {
  const changes: string[] = [];
  for (const [p, e] of after) {
    const old = before.get(p);
    if (!old) changes.push(`added ${p}`);
    else if (e.kind === "file" && (old.sha256 !== e.sha256 || old.size !== e.size || old.mtimeMs !== e.mtimeMs)) changes.push(`changed ${p}`);
  }
  for (const p of before.keys()) if (!after.has(p)) changes.push(`removed ${p}`);
  return changes.sort();
}
