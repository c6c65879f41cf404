import { DataError } from "@kiln/contract";
import { CHAT_ROLES, type ChatMessage, type ChatTemplate, type TextSegment } from "./chat-template.js";
import type { ExampleRow } from "./example-rows.js";

/**
 * The shapes of example rows: `chat` ({"messages": [{"role", "content"}, ...]},
 * rendered with the chat template, only the assistant's turns trained),
 * `instruct` ({"prompt", "completion"}, or Alpaca's {"instruction", "input",
 * "output"}: only the completion trained) and `text` ({"text"}: all trained).
 */
export const EXAMPLE_FORMATS = ["chat", "instruct", "text"] as const;
export type ExampleFormat = (typeof EXAMPLE_FORMATS)[number];

/** An example's text, cut into parts trained on or not; `separate` asks for the tokenizer's document separator before it and its end token after the trained part. */
export interface ExampleText {
  segments: TextSegment[];
  /** True for instruct and text rows: kiln adds the tokenizer's separator first and, for instruct, its end token after the completion. */
  separate: boolean;
}

const HINT_SHAPES = 'Rows are {"messages": [{"role": ..., "content": ...}]} (chat), {"prompt": ..., "completion": ...} or {"instruction": ..., "input": ..., "output": ...} (instruct), or {"text": ...} (text).';

/** The format a row's keys say, or undefined when they fit none. */
export function formatOfRow(value: unknown): ExampleFormat | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const keys = value as Record<string, unknown>;
  if ("messages" in keys) return "chat";
  if (("prompt" in keys && "completion" in keys) || ("instruction" in keys && "output" in keys)) return "instruct";
  if ("text" in keys) return "text";
  return undefined;
}

/** The format of a file from its first row: refused, naming the row, when the keys fit none. */
export function detectFormat(first: ExampleRow): ExampleFormat {
  const format = formatOfRow(first.value);
  if (format === undefined) {
    const keys = typeof first.value === "object" && first.value !== null ? Object.keys(first.value).join(", ") : typeof first.value;
    throw new DataError(`cannot tell the example format from this row (keys: ${keys || "none"})`, { where: first.where, hint: `${HINT_SHAPES} Or pass --format.` });
  }
  return format;
}

/** A row as text parts, per its format; a row that does not fit is refused naming the row and the key. */
export function exampleText(row: ExampleRow, format: ExampleFormat, template: ChatTemplate | undefined): ExampleText {
  const { where } = row;
  if (typeof row.value !== "object" || row.value === null || Array.isArray(row.value)) {
    throw new DataError(`a row must be a JSON object, got ${Array.isArray(row.value) ? "an array" : row.value === null ? "null" : typeof row.value}`, { where, hint: HINT_SHAPES });
  }
  const v = row.value as Record<string, unknown>;
  if (format === "chat") {
    if (template === undefined) throw new Error("chat rows need a chat template");
    return { segments: template.segments(chatMessages(v.messages, where), where), separate: false };
  }
  if (format === "instruct") {
    if ("prompt" in v || "completion" in v) {
      return { segments: [{ text: text(v, "prompt", where), trained: false }, { text: text(v, "completion", where), trained: true }], separate: true };
    }
    const instruction = text(v, "instruction", where);
    const input = v.input === undefined || v.input === null ? "" : text(v, "input", where);
    // Alpaca's rows: the instruction, then the input when there is one, each followed by a blank line.
    const prompt = `${instruction}\n\n${input === "" ? "" : `${input}\n\n`}`;
    return { segments: [{ text: prompt, trained: false }, { text: text(v, "output", where), trained: true }], separate: true };
  }
  return { segments: [{ text: text(v, "text", where), trained: true }], separate: true };
}

function text(v: Record<string, unknown>, key: string, where: string): string {
  const x = v[key];
  if (x === undefined) throw new DataError(`the row has no "${key}"`, { where, hint: HINT_SHAPES });
  if (typeof x !== "string") throw new DataError(`"${key}" must be a string, got ${x === null ? "null" : typeof x}`, { where, hint: HINT_SHAPES });
  return x;
}

function chatMessages(messages: unknown, where: string): ChatMessage[] {
  if (!Array.isArray(messages)) throw new DataError(`"messages" must be an array of {"role", "content"} objects`, { where, hint: HINT_SHAPES });
  if (messages.length === 0) throw new DataError(`"messages" is empty`, { where, hint: "Each conversation needs at least one assistant message to train on." });
  const out = messages.map((m, i): ChatMessage => {
    if (typeof m !== "object" || m === null) throw new DataError(`messages[${i}] must be an object with "role" and "content"`, { where, hint: HINT_SHAPES });
    const { role, content } = m as Record<string, unknown>;
    if (!(CHAT_ROLES as readonly unknown[]).includes(role)) {
      throw new DataError(`messages[${i}].role is ${JSON.stringify(role) ?? "missing"}; a role is one of ${CHAT_ROLES.join(", ")}`, { where, hint: "Rename the role, or leave the message out." });
    }
    if (content === undefined || content === null) throw new DataError(`messages[${i}] (${String(role)}) has no "content"`, { where, hint: "Give each message its text as \"content\"." });
    if (typeof content !== "string") throw new DataError(`messages[${i}].content must be a string, got ${typeof content}`, { where, hint: "Give each message its text as a string." });
    return { role: role as ChatMessage["role"], content };
  });
  if (!out.some((m) => m.role === "assistant")) throw new DataError("the conversation has no assistant message: nothing in it would be trained", { where, hint: "Add the assistant's reply, or leave the row out." });
  return out;
}
